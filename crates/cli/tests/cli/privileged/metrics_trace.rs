//! `hoptrace trace --metrics` scraped during a bridge-lab run, inside the
//! lab's hypervisor namespace, parsed by the Prometheus client library's
//! strict OpenMetrics parser (`metrics_common/scrape.py`): per stream, the
//! timelines counter and the end-to-end histogram count every frame the
//! publisher sent, the lost-events counter is 0 as in the tracer's
//! summary, and each `--threshold` has a spike counter no larger than the
//! histogram's count above that bound.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::lab_common;
use crate::metrics_common;

use lab_common::hoptrace;
use metrics_common::{scrape, value, Samples};

const LAB: &str = "trmet";
const PORT: u16 = 9464;

/// Tears the lab down even when the test fails.
struct Lab;
impl Drop for Lab {
    fn drop(&mut self) {
        let _ = hoptrace(&["lab", "down", LAB]);
    }
}

#[test]
fn a_scrape_during_a_lab_trace_counts_every_frame_per_stream_and_stage() {
    if !hoptrace_netns::require_privileges(
        "a_scrape_during_a_lab_trace_counts_every_frame_per_stream_and_stage",
    ) {
        return;
    }
    crate::lab_common::clear_leftover(LAB);
    let up = hoptrace(&["lab", "up", "bridge", "--name", LAB]);
    let _lab = Lab;
    assert!(
        up.status.success(),
        "lab up: {}",
        String::from_utf8_lossy(&up.stderr)
    );
    let hyp = format!("ht-{LAB}-hyp");
    let exe = env!("CARGO_BIN_EXE_hoptrace");
    let port = PORT.to_string();
    let tracer = Command::new("ip")
        .args([
            "netns", "exec", &hyp, exe, "trace", "--plain", "--netns", &hyp,
        ])
        .args(["--iface", "in0", "--iface", "tap0", "--duration", "60s"])
        .args([
            "--threshold",
            "50us",
            "--threshold",
            "1ms",
            "--metrics",
            &port,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the tracer");
    let _kill = KillOnDrop(tracer.id());
    // The endpoint answers once the tracer is attached.
    let deadline = Instant::now() + Duration::from_secs(30);
    while scrape(&hyp, PORT).is_err() {
        assert!(
            Instant::now() < deadline,
            "no /metrics on {hyp} port {PORT}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(1));
    let publ = hoptrace(&[
        "lab",
        "exec",
        LAB,
        "pub",
        "--",
        exe,
        "sv",
        "publish",
        "--iface",
        "eth0",
        "--streams",
        "2",
        "--rate",
        "4000",
        "--samples",
        "2000",
    ]);
    assert!(
        publ.status.success(),
        "publish: {}",
        String::from_utf8_lossy(&publ.stderr)
    );

    // Timelines are reported after their linger: scrape until both streams
    // have their 2000 (or give up and show what there is). Every frame is
    // one timeline of some status (ok, incomplete, ...).
    let streams = ["HOPTRACE_SV0", "HOPTRACE_SV1"];
    let timelines = |s: &Samples, st: &str| -> f64 {
        s.get("hoptrace_trace_timelines_total")
            .into_iter()
            .flatten()
            .filter(|(l, _)| l.get("stream").map(String::as_str) == Some(st))
            .map(|(_, v)| v)
            .sum()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let s = loop {
        let (_, s) = scrape(&hyp, PORT).expect("scrape");
        if streams.iter().all(|st| timelines(&s, st) == 2000.0) || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    let h = "hoptrace_trace_stage_latency_seconds";
    for st in streams {
        assert_eq!(timelines(&s, st), 2000.0, "{st}: {s:?}");
        // end_to_end is a stage of every packet that arrived (status ok).
        let ok = value(
            &s,
            "hoptrace_trace_timelines_total",
            &[("stream", st), ("status", "ok")],
        )
        .expect("ok timelines");
        assert!(ok >= 1000.0, "{st}: only {ok} of 2000 arrived: {s:?}");
        let e2e = [("stream", st), ("stage", "end_to_end")];
        assert_eq!(value(&s, &format!("{h}_count"), &e2e), Some(ok), "{st}");
        let inf = [("stream", st), ("stage", "end_to_end"), ("le", "+Inf")];
        assert_eq!(value(&s, &format!("{h}_bucket"), &inf), Some(ok), "{st}");
        // Spikes above 1 ms: the packets above the 1 ms bucket bound.
        let le_1ms = [("stream", st), ("stage", "end_to_end"), ("le", "0.001")];
        let under = value(&s, &format!("{h}_bucket"), &le_1ms).expect("a 1 ms bucket");
        let spike = |above: &str| {
            value(
                &s,
                "hoptrace_trace_spikes_total",
                &[("stream", st), ("stage", "end_to_end"), ("above", above)],
            )
        };
        assert_eq!(spike("1ms"), Some(ok - under), "{st}");
        assert!(spike("50us").is_some(), "{st}: a 50us spike counter");
    }
    let checks: f64 = s["hoptrace_doctor_checks"].iter().map(|(_, v)| v).sum();
    assert!(checks >= 25.0, "{checks} host checks as gauges");
    assert_eq!(
        value(&s, "hoptrace_trace_lost_events_total", &[]),
        Some(0.0)
    );

    // The tracer's own summary says the same.
    let _ = Command::new("kill")
        .args(["-INT", &tracer.id().to_string()])
        .status();
    let out = tracer.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("timelines 4000 "), "{stdout}");
    assert!(
        stdout.contains(&format!("metrics at http://127.0.0.1:{PORT}/metrics")),
        "{stdout}"
    );
}

/// Ends the tracer if the test fails before it does.
struct KillOnDrop(u32);
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.0.to_string())
            .stderr(Stdio::null())
            .status();
    }
}
