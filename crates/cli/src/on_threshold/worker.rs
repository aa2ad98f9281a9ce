//! The worker thread of `--on-threshold`: for each snippet the receive
//! thread closed, write its pcapng file (with `pcap:N`), run the other
//! actions ([`super::actions`]), and give the buffer back.
//!
//! A snippet is encoded in memory first ([`super::snippet::encode`]); the
//! file is written only when the bytes written so far plus its own stay
//! within `--on-threshold-max-bytes`, else its exceedances are counted as
//! not kept (the other actions still run: the cap bounds the disk, not
//! the alarms). Files are created new (`O_EXCL`), never over another; the
//! folder is made at the first snippet. A file that cannot be written is
//! counted (the first error said on stderr) and the run goes on.
//!
//! `exec:` commands see the exceedance in their environment:
//! `HOPTRACE_COMMAND` (`sv subscribe`), `HOPTRACE_STAGE` (`rx..app`),
//! `HOPTRACE_THRESHOLD_NS`, and of the snippet's first exceedance
//! `HOPTRACE_SVID`, `HOPTRACE_SMPCNT`, `HOPTRACE_T_RX_NS`,
//! `HOPTRACE_T_APP_NS`, `HOPTRACE_LATENCY_NS`; `HOPTRACE_EXCEEDANCES` (how
//! many the snippet holds) and `HOPTRACE_PCAP` (its file, when written).

use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use super::actions::{ActionCounts, Actions};
use super::ring::Snippet;
use super::snippet::{encode, file_name, Context, Exceedance};

/// One snippet handled: its file (with `pcap:N`) and exceedances (its
/// type is the summary file's).
pub use hoptrace_record::threshold_summary::KeptSnippet;

/// What the worker did.
#[derive(Debug, Default)]
pub struct Outcome {
    pub kept: Vec<KeptSnippet>,
    pub bytes: u64,
    /// Exceedances whose snippet would have passed the byte cap.
    pub over_bytes: u64,
    /// Exceedances whose snippet could not be written.
    pub write_failed: u64,
    pub actions: ActionCounts,
}

/// The worker's settings.
pub struct Setup {
    pub ctx: Context,
    /// Where snippets go (None: no `pcap:N`).
    pub dir: Option<PathBuf>,
    pub max_bytes: u64,
    pub actions: Actions,
}

struct Worker {
    setup: Setup,
    out: Outcome,
    said_write_error: bool,
}

impl Worker {
    fn handle(&mut self, s: &Snippet) {
        let (bytes, exceedances) = match encode(&self.setup.ctx, s) {
            Ok(e) => e,
            Err(e) => {
                self.write_failed(s.exceedances, format!("encoding a snippet: {e}"));
                return;
            }
        };
        let Some(first) = exceedances.first().cloned() else {
            return;
        };
        let mut kept = KeptSnippet {
            file: None,
            bytes: 0,
            frames: s.frames().len(),
            cut: s.cut,
            ended_early: s.ended_early,
            exceedances,
        };
        let mut path = None;
        if let Some(dir) = self.setup.dir.clone() {
            if self.out.bytes + bytes.len() as u64 > self.setup.max_bytes {
                self.out.over_bytes += s.exceedances;
            } else {
                match write_new(&dir, &file_name(&first), &bytes) {
                    Ok(p) => {
                        self.out.bytes += bytes.len() as u64;
                        kept.bytes = bytes.len() as u64;
                        kept.file = p.file_name().map(|n| n.to_string_lossy().into_owned());
                        path = Some(p);
                    }
                    Err(e) => self.write_failed(s.exceedances, e),
                }
            }
        }
        let env = environment(&self.setup.ctx, &first, s.exceedances, path.as_deref());
        self.setup.actions.fire(&env);
        if self.setup.dir.is_none() || path.is_some() {
            self.out.kept.push(kept);
        }
    }

    fn write_failed(&mut self, n: u64, e: String) {
        self.out.write_failed += n;
        if !self.said_write_error {
            self.said_write_error = true;
            eprintln!(
                "hoptrace {}: --on-threshold pcap: {e} (the run goes on; further failures are counted)",
                self.setup.ctx.command
            );
        }
    }
}

/// Write `bytes` to a new file `name` in `dir` (made if missing); a name
/// already taken gets `-2`, `-3`, ... before its extension.
fn write_new(dir: &std::path::Path, name: &str, bytes: &[u8]) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let stem = name.trim_end_matches(".pcapng");
    for n in 1..100 {
        let path = match n {
            1 => dir.join(name),
            n => dir.join(format!("{stem}-{n}.pcapng")),
        };
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut f) => {
                return f
                    .write_all(bytes)
                    .map(|()| path.clone())
                    .map_err(|e| format!("writing {}: {e}", path.display()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("creating {}: {e}", path.display())),
        }
    }
    Err(format!(
        "{name}: 99 files of that name already in {}",
        dir.display()
    ))
}

/// The `exec:` environment of a snippet (module docs).
fn environment(
    ctx: &Context,
    first: &Exceedance,
    count: u64,
    pcap: Option<&std::path::Path>,
) -> Vec<(String, String)> {
    let mut env = vec![
        ("HOPTRACE_COMMAND", ctx.command.to_string()),
        ("HOPTRACE_STAGE", ctx.stage.to_string()),
        ("HOPTRACE_THRESHOLD_NS", ctx.threshold_ns.to_string()),
        ("HOPTRACE_T_RX_NS", first.t_rx_ns.to_string()),
        ("HOPTRACE_T_APP_NS", first.t_app_ns.to_string()),
        ("HOPTRACE_LATENCY_NS", first.latency_ns.to_string()),
        ("HOPTRACE_EXCEEDANCES", count.to_string()),
    ];
    if let Some(s) = &first.sv_id {
        env.push(("HOPTRACE_SVID", s.clone()));
    }
    if let Some(n) = first.smp_cnt {
        env.push(("HOPTRACE_SMPCNT", n.to_string()));
    }
    if let Some(p) = pcap {
        env.push(("HOPTRACE_PCAP", p.display().to_string()));
    }
    env.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// The worker thread: handle snippets from `rx` until the receive thread
/// hangs up, reaping commands meanwhile; buffers go back on `back`.
pub fn run(setup: Setup, rx: Receiver<Snippet>, back: Sender<Snippet>) -> Outcome {
    let mut w = Worker {
        setup,
        out: Outcome::default(),
        said_write_error: false,
    };
    loop {
        match rx.recv_timeout(Duration::from_millis(250)) {
            Ok(s) => {
                w.handle(&s);
                let _ = back.send(s);
            }
            Err(RecvTimeoutError::Timeout) => w.setup.actions.reap(),
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let mut out = w.out;
    out.actions = w.setup.actions.finish();
    out
}
