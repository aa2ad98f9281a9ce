//! Step 1b of a run: `hoptrace doctor --json` on the lab's hypervisor path
//! (its interfaces in the hypervisor namespace, so the tap's reader, QEMU's
//! vCPU and vhost threads are looked at too), saved as `doctor.json` in the
//! run's directory. The tracer and the end-to-end join get it with
//! `--doctor-report`, so every recording of the run carries the same
//! summary; a doctor that fails is reported and the run goes on without it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::run::{note, RunResult};

/// Run the checks; `Some(doctor.json)` when they ran.
pub(crate) fn run(
    exe: &Path,
    hyp: &str,
    devs: &[&str],
    out: &Path,
    res: &mut RunResult,
) -> Option<PathBuf> {
    let mut args: Vec<String> = vec![
        "doctor".into(),
        "--json".into(),
        "--netns".into(),
        hyp.into(),
    ];
    for d in devs {
        args.extend(["--iface".into(), d.to_string()]);
    }
    let file = out.join("doctor.json");
    let o = match Command::new(exe).args(&args).output() {
        Ok(o) => o,
        Err(e) => {
            note(
                res,
                format!("host checks not run ({e}); the recordings carry no doctor summary"),
            );
            return None;
        }
    };
    if !o.status.success() {
        note(
            res,
            format!(
                "host checks failed to run ({}); the recordings carry no doctor summary",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
        );
        return None;
    }
    if let Err(e) = std::fs::write(&file, &o.stdout) {
        note(
            res,
            format!(
                "writing {}: {e}; the recordings carry no doctor summary",
                file.display()
            ),
        );
        return None;
    }
    note(
        res,
        format!(
            "host checks: hoptrace {} -> {}",
            args.join(" "),
            file.display()
        ),
    );
    if let Some(line) = headline(&o.stdout) {
        note(res, format!("host checks: {line}"));
    }
    Some(file)
}

/// `N checks: F fail, W warn, U unknown; failed: ids` from the JSON summary.
fn headline(json: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    let s = v.get("summary")?;
    let n = |k: &str| s["status"][k].as_u64().unwrap_or(0);
    let failed: Vec<&str> = s["failed"]
        .as_array()?
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    Some(format!(
        "{} checks: {} fail, {} warn, {} unknown, {} pass; failed: {}",
        s["checks"].as_u64()?,
        n("fail"),
        n("warn"),
        n("unknown"),
        n("pass"),
        if failed.is_empty() {
            "none".to_string()
        } else {
            failed.join(", ")
        }
    ))
}
