//! Detection of the optional fentry and kprobe backends.
//!
//! The hop programs are tracepoints (`tp_btf`, `raw_tp` as fallback: see
//! [`crate::loader`]). Whether the kernel would also allow fentry or kprobe
//! programs is not guessed from the kernel config: the BPF object carries two
//! empty programs, `probe_fentry` (`fentry/tun_net_xmit`) and `probe_kprobe`
//! (`kprobe/tun_net_xmit`). Each is loaded on its own (every other program's
//! autoload off) and attached, then dropped at once (links detach on drop).
//! The result, success or the kernel's refusal with its errno, is what
//! `--list-backends` and the start line of `hoptrace trace` print.
//!
//! Which backends the binary carries at all is read from the embedded BPF
//! object itself ([`compiled_in`]): it is opened (parsed, not loaded: no
//! privilege, no kernel involved) and the kind of each program's ELF section
//! (`tp_btf/netif_receive_skb` is a `tp_btf` program) is listed, so
//! `hoptrace --version` says what was compiled, not what a list claims.

use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::OpenObject;

use crate::skel::HopsSkelBuilder;

/// Outcome of probing one optional backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// `fentry` or `kprobe`.
    pub backend: &'static str,
    /// The kernel function the probe program targets.
    pub target: &'static str,
    /// `Ok(())`: loads and attaches; `Err(text)`: where and why it failed.
    pub result: Result<(), String>,
}

impl Probe {
    /// `fentry refused at load: EPERM (Operation not permitted)` or
    /// `fentry usable (fentry/tun_net_xmit loads and attaches)`.
    pub fn describe(&self) -> String {
        match &self.result {
            Ok(()) => format!(
                "{} usable ({}/{} loads and attaches; not used: the tracepoints cover every hop)",
                self.backend, self.backend, self.target
            ),
            Err(e) => format!("{} refused {e}", self.backend),
        }
    }
}

fn errno_text(e: &libbpf_rs::Error) -> String {
    let text = format!("{e:#}");
    let name = [
        ("Operation not permitted", "EPERM"),
        ("Permission denied", "EACCES"),
        ("No such file or directory", "ENOENT"),
        ("Invalid argument", "EINVAL"),
        ("Operation not supported", "EOPNOTSUPP"),
        ("No such process", "ESRCH"),
    ]
    .iter()
    .find(|(msg, _)| text.contains(msg))
    .map(|(_, n)| *n);
    match name {
        Some(n) => format!("{n} ({text})"),
        None => text,
    }
}

fn probe_one(prog_name: &str) -> Result<(), String> {
    if std::env::var_os("HOPTRACE_BPF_DEBUG").is_none() {
        libbpf_rs::set_print(None);
    }
    let mut storage = MaybeUninit::<OpenObject>::uninit();
    let mut open = HopsSkelBuilder::default()
        .open(&mut storage)
        .map_err(|e| format!("at open: {}", errno_text(&e)))?;
    for mut p in open.open_object_mut().progs_mut() {
        let keep = p.name().to_string_lossy() == prog_name;
        p.set_autoload(keep);
    }
    let skel = open
        .load()
        .map_err(|e| format!("at load: {}", errno_text(&e)))?;
    for prog in skel.object().progs_mut() {
        if prog.name().to_string_lossy() == prog_name {
            let link = prog
                .attach()
                .map_err(|e| format!("at attach: {}", errno_text(&e)))?;
            drop(link);
            return Ok(());
        }
    }
    Err(format!("program {prog_name} missing from the BPF object"))
}

/// Probe fentry and kprobe (needs the same privileges as tracing).
pub fn probe_optional() -> Vec<Probe> {
    vec![
        Probe {
            backend: "fentry",
            target: "tun_net_xmit",
            result: probe_one("probe_fentry"),
        },
        Probe {
            backend: "kprobe",
            target: "tun_net_xmit",
            result: probe_one("probe_kprobe"),
        },
    ]
}

/// The kinds of BPF program in the embedded object, in the object's order,
/// each once: the section prefix of every program (`tp_btf`, `raw_tp`,
/// `fentry`, `kprobe`). The object is opened, not loaded.
pub fn compiled_in() -> Result<Vec<String>, String> {
    if std::env::var_os("HOPTRACE_BPF_DEBUG").is_none() {
        libbpf_rs::set_print(None);
    }
    let mut storage = MaybeUninit::<OpenObject>::uninit();
    let open = HopsSkelBuilder::default()
        .open(&mut storage)
        .map_err(|e| format!("opening the embedded BPF object: {}", errno_text(&e)))?;
    let mut kinds: Vec<String> = Vec::new();
    for prog in open.open_object().progs() {
        let section = prog.section().to_string_lossy();
        let kind = section.split('/').next().unwrap_or_default().to_string();
        if !kind.is_empty() && !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    Ok(kinds)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_embedded_object_carries_the_tracepoint_backends_and_the_two_probes() {
        let kinds = super::compiled_in().unwrap();
        assert_eq!(kinds, ["tp_btf", "raw_tp", "fentry", "kprobe"]);
    }
}
