//! Tearing a lab down: from its state file, or from what carries its name.
//!
//! [`teardown`] removes what a [`LabState`] records, in reverse order of
//! creation: daemons (by pid, only if still the recorded program), XDP
//! programs (detached from their interfaces), namespaces (deleting one kills
//! the processes inside and destroys its links), orphan processes whose
//! command line names the lab, run directories, the state file; then it checks
//! by kernel id that the XDP programs were freed. [`down`] works without a
//! state file too (a run killed before its first save). [`down_all`] also
//! removes orphans of runs that died before saving their state: namespaces
//! named like a lab's (`ht-<lab>-pub|hyp|vmN`, never the `ht-` namespaces of
//! tests, which have no second dash pattern of that form) and processes whose
//! command line points into `/run/hoptrace/labs/` (OVS daemons, QEMU) or is a
//! `hoptrace lab forward`.

use anyhow::Result;

use crate::state::{check_name, comm_of, kill_daemon, LabState, STATE_DIR};

/// Remove everything recorded in `st` (errors ignored: best effort, idempotent).
pub fn teardown(st: &LabState) {
    for d in st.daemons.iter().rev() {
        kill_daemon(d);
    }
    crate::xdp::detach(st);
    for (_, ns) in st.namespaces.iter().rev() {
        hoptrace_netns::delete_namespace(ns);
    }
    kill_orphan_processes(Some(&st.name));
    for d in &st.dirs {
        if d.starts_with(STATE_DIR) {
            let _ = std::fs::remove_dir_all(d);
        }
    }
    if let Err(e) = crate::xdp::check_gone(st) {
        eprintln!("lab down: {e:#}");
    }
    let _ = std::fs::remove_file(LabState::file(&st.name));
}

/// Tear down lab `name`. Without a state file (a run killed before it
/// saved one), remove what carries the lab's name: namespaces
/// `ht-<name>-*`, processes started for it, its run directory; an error
/// only when nothing of the lab exists at all.
pub fn down(name: &str) -> Result<LabState> {
    check_name(name)?;
    if LabState::file(name).exists() {
        let st = LabState::load(name)?;
        teardown(&st);
        return Ok(st);
    }
    let prefix = format!("{}{name}-", hoptrace_netns::PREFIX);
    let orphans: Vec<String> = hoptrace_netns::list_namespaces(&prefix)
        .into_iter()
        .filter(|n| is_lab_namespace(n))
        .collect();
    let killed = kill_orphan_processes(Some(name));
    let run_dir = LabState::run_dir(name);
    let had_dir = run_dir.exists();
    if orphans.is_empty() && killed.is_empty() && !had_dir {
        // The usual "no lab named ..." error.
        LabState::load(name)?;
    }
    for ns in &orphans {
        hoptrace_netns::delete_namespace(ns);
    }
    let _ = std::fs::remove_dir_all(&run_dir);
    Ok(LabState {
        name: name.to_string(),
        topology: format!(
            "no state file; removed {} orphan namespace(s), {} process(es){}",
            orphans.len(),
            killed.len(),
            if had_dir { ", its run directory" } else { "" }
        ),
        ..Default::default()
    })
}

/// Whether a namespace name has the shape of a lab's (`ht-<lab>-<role>`).
pub fn is_lab_namespace(ns: &str) -> bool {
    let Some(rest) = ns.strip_prefix(hoptrace_netns::PREFIX) else {
        return false;
    };
    let Some((lab, role)) = rest.split_once('-') else {
        return false;
    };
    check_name(lab).is_ok()
        && (role == "pub"
            || role == "hyp"
            || (role.starts_with("vm")
                && role.len() > 2
                && role[2..].bytes().all(|b| b.is_ascii_digit())))
}

/// Tear down every lab, then orphans. Returns what was removed (for printing).
pub fn down_all() -> Vec<String> {
    let mut removed = Vec::new();
    for name in LabState::list() {
        if let Ok(st) = LabState::load(&name) {
            teardown(&st);
            removed.push(format!("lab {name} ({})", st.topology));
        } else {
            let _ = std::fs::remove_file(LabState::file(&name));
            removed.push(format!("unreadable state file of lab {name}"));
        }
    }
    for ns in hoptrace_netns::list_namespaces(hoptrace_netns::PREFIX) {
        if is_lab_namespace(&ns) {
            hoptrace_netns::delete_namespace(&ns);
            removed.push(format!("orphan namespace {ns}"));
        }
    }
    for p in kill_orphan_processes(None) {
        removed.push(format!("orphan process {p}"));
    }
    if let Ok(dir) = std::fs::read_dir(STATE_DIR) {
        for e in dir.flatten() {
            if e.path().is_dir() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    removed
}

/// Kill processes started by a lab (of `lab`, or of any lab) that survived
/// their namespace: their command line names the lab's run directory or is
/// a `hoptrace lab forward`. Returns "pid comm" of each.
pub fn kill_orphan_processes(lab: Option<&str>) -> Vec<String> {
    let me = std::process::id() as i32;
    let mut killed = Vec::new();
    let Ok(proc_dir) = std::fs::read_dir("/proc") else {
        return killed;
    };
    let marker = match lab {
        Some(l) => format!("{STATE_DIR}/{l}"),
        None => format!("{STATE_DIR}/"),
    };
    for e in proc_dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let forwarder = args.windows(2).any(|w| w[0] == "lab" && w[1] == "forward")
            && match lab {
                Some(l) => args.windows(2).any(|w| w[0] == "--lab" && w[1] == l),
                None => true,
            };
        let in_run_dir = args.iter().any(|a| a.contains(&marker));
        if forwarder || in_run_dir {
            let comm = comm_of(pid).unwrap_or_default();
            if comm == "ip" {
                continue;
            }
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            killed.push(format!("{pid} {comm}"));
        }
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_namespace_shape() {
        assert!(is_lab_namespace("ht-demo-pub"));
        assert!(is_lab_namespace("ht-a1-vm0"));
        assert!(is_lab_namespace("ht-a1-hyp"));
        assert!(!is_lab_namespace("ht-ta12340"));
        assert!(!is_lab_namespace("ht-demo-vm"));
        assert!(!is_lab_namespace("other-demo-pub"));
        assert!(!is_lab_namespace("ht-Demo-pub"));
    }
}
