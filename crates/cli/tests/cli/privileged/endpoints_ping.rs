//! `hoptrace ping` against `hoptrace reflect` across a veth pair: every
//! sequence number accounted for, injected loss counted, an injected delay
//! measured, and `--max-latency --break` exiting with code 3.

use crate::endpoints_common;

use std::time::Duration;

use endpoints_common::*;

fn start_reflector(p: &Pair, extra: &[&str]) -> Running {
    let mut args = vec!["reflect", "--iface", "vb"];
    args.extend_from_slice(extra);
    start_ready(&p.b, &args)
}

fn ping_line<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in {out}"))
}

#[test]
fn every_ping_is_answered_once() {
    if !hoptrace_netns::require_privileges("every_ping_is_answered_once") {
        return;
    }
    let p = pair("pga");
    let _r = start_reflector(&p, &[]);
    let out = run(
        &p.a,
        &args("ping --iface va --peer 02:00:00:00:00:0b --count 2000 --interval 500us"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let l = ping_line(&text, "sent ");
    assert_eq!(field(l, "sent"), 2000, "{text}");
    assert_eq!(field(l, "received"), 2000, "{text}");
    assert_eq!(field(l, "lost"), 0, "{text}");
    assert_eq!(field(l, "duplicated"), 0, "{text}");
    assert!(text.contains("stamps: software CLOCK_REALTIME"), "{text}");
}

#[test]
fn injected_loss_is_counted_every_sequence_accounted_for_and_both_ends_answer_again_after_their_link_was_down(
) {
    if !hoptrace_netns::require_privileges(
        "injected_loss_is_counted_every_sequence_accounted_for_and_both_ends_answer_again_after_their_link_was_down",
    ) {
        return;
    }
    let p = pair("pgl");
    let r = start_reflector(&p, &[]);
    let dir = ScratchDir::new("ept");
    let rec = dir.path().join("ping-rec");
    let ping = start(
        &p.a,
        &args(&format!(
            "ping --iface va --count 3000 --interval 1ms --record {}",
            rec.display()
        )),
    );
    // netem is not available on every kernel: take the reflector's link
    // down, then the pinger's; each end must live through its own.
    std::thread::sleep(Duration::from_millis(600));
    p.b.ip(&["link", "set", "vb", "down"]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    p.b.ip(&["link", "set", "vb", "up"]).unwrap();
    std::thread::sleep(Duration::from_millis(600));
    p.a.ip(&["link", "set", "va", "down"]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    p.a.ip(&["link", "set", "va", "up"]).unwrap();
    let (st, text) = ping.finish(Duration::from_secs(30));
    assert!(st.success(), "{text}");
    let l = ping_line(&text, "sent ");
    let (sent, received, lost) = (field(l, "sent"), field(l, "received"), field(l, "lost"));
    assert_eq!(sent, 3000, "{text}");
    assert!(lost > 0, "{text}");
    assert_eq!(received + lost, sent, "{text}");
    assert_eq!(field(l, "duplicated"), 0, "{text}");
    // About 600 ms of requests are lost while a link is down; had either
    // end stopped at its link's going down, every request after it would
    // be (about 2400 or 1100).
    assert!(lost < 1000, "both ends answer again once up: {text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("link down at ") && l.contains("frames again after")),
        "the pinger names its link's time down: {text}"
    );
    r.signal("INT");
    let (rs, rtext) = r.finish(Duration::from_secs(10));
    assert!(rs.success(), "{rtext}");
    assert!(
        rtext
            .lines()
            .any(|l| l.starts_with("link down at ") && l.contains("frames again after")),
        "the reflector names its link's time down: {rtext}"
    );
    // The recording has one row per sequence number, lost ones incomplete.
    let r = hoptrace_record::RecordingReader::open(&rec).unwrap();
    let rows: Vec<_> = r.rows().unwrap().map(|x| x.unwrap()).collect();
    assert_eq!(rows.len() as u64, sent);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row.seq, i as u64);
    }
    let incomplete = rows
        .iter()
        .filter(|r| r.status == hoptrace_record::PacketStatus::Incomplete)
        .count() as u64;
    assert_eq!(incomplete, lost);
}

#[test]
fn injected_delay_is_measured_and_break_exits_3() {
    if !hoptrace_netns::require_privileges("injected_delay_is_measured_and_break_exits_3") {
        return;
    }
    let p = pair("pgd");
    // The reflector holds each reply 20 ms (netem is not available here).
    let _r = start_reflector(&p, &["--delay", "20ms"]);
    let out = run(&p.a, &args("ping --iface va --count 20 --interval 50ms"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let l = ping_line(&text, "sent ");
    assert_eq!(field(l, "received"), 20, "{text}");
    // min RTT cannot be below the injected 20 ms; the median is close to it.
    let rtt = ping_line(&text, "rtt ");
    let min_ms: f64 = rtt
        .split("min ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        rtt.contains("min ") && rtt.split("min ").nth(1).unwrap().contains(" ms"),
        "{rtt}"
    );
    assert!((20.0..40.0).contains(&min_ms), "{rtt}");

    let out = run(
        &p.a,
        &args("ping --iface va --count 100 --interval 50ms --max-latency 10ms --break"),
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("first over: seq 0"), "{text}");
    let sent = field(ping_line(&text, "sent "), "sent");
    assert!(sent < 100, "ping must stop at the first excess: {text}");
}

/// A trace instance of our own under /sys/kernel/tracing/instances, removed
/// on drop (so other tracers' buffers are not touched).
struct TraceInstance(std::path::PathBuf, String);

impl TraceInstance {
    fn new() -> Self {
        let name = hoptrace_netns::unique_name("epmk");
        let root = std::path::Path::new("/sys/kernel/tracing");
        if !root.join("instances").exists() {
            let st = std::process::Command::new("mount")
                .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
                .status()
                .unwrap();
            assert!(st.success(), "tracefs is not mounted and cannot be mounted");
        }
        let dir = root.join("instances").join(&name);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        TraceInstance(dir, name)
    }
    fn trace(&self) -> String {
        std::fs::read_to_string(self.0.join("trace")).unwrap()
    }
}

impl Drop for TraceInstance {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// `(seq, rtt_ns)` of every marker line in a trace buffer.
fn markers(trace: &str) -> Vec<(u64, u64)> {
    trace
        .lines()
        .filter_map(|l| l.split("hoptrace ping: seq=").nth(1))
        .map(|rest| {
            let seq = rest.split(' ').next().unwrap().parse().unwrap();
            let rtt = rest.split("rtt_ns=").nth(1).unwrap();
            (seq, rtt.split(' ').next().unwrap().parse().unwrap())
        })
        .collect()
}

#[test]
fn max_latency_writes_one_marker_per_excess_into_the_trace_buffer() {
    if !hoptrace_netns::require_privileges(
        "max_latency_writes_one_marker_per_excess_into_the_trace_buffer",
    ) {
        return;
    }
    let p = pair("pgm");
    // Every reply is held 5 ms: every RTT exceeds --max-latency 1ms.
    let _r = start_reflector(&p, &["--delay", "5ms"]);
    let inst = TraceInstance::new();
    let dir = ScratchDir::new("epm");
    let rec = dir.path().join("ping-rec");
    let out = run(
        &p.a,
        &args(&format!("ping --iface va --count 8 --interval 20ms --max-latency 1ms --trace-instance {} --record {}", inst.1, rec.display())),
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}");
    assert!(text.contains("over max-latency 1.000 ms: 8"), "{text}");
    assert!(
        text.contains(&format!("instances/{}/trace_marker: 8", inst.1)),
        "{text}"
    );
    // The buffer holds exactly one marker per sequence number, with the RTT
    // ping measured for it (t_rx - t_tx in the recording).
    let mut got = markers(&inst.trace());
    got.sort();
    let r = hoptrace_record::RecordingReader::open(&rec).unwrap();
    let meta = r.meta().clone();
    let want: Vec<(u64, u64)> = r
        .rows()
        .unwrap()
        .map(|x| x.unwrap())
        .map(|row| {
            let rtt = row.hop(&meta, "rx").unwrap() - row.hop(&meta, "tx").unwrap();
            (row.seq, rtt as u64)
        })
        .collect();
    assert_eq!(got, want, "{}", inst.trace());
    assert!(got.iter().all(|&(_, v)| v > 5_000_000), "{got:?}");

    // --break: stops at the first excess, exit code 3, one marker more.
    let out = run(
        &p.a,
        &args(&format!("ping --iface va --count 50 --interval 20ms --max-latency 1ms --break --trace-instance {}", inst.1)),
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains("first over: seq 0"), "{text}");
    let all = markers(&inst.trace());
    assert_eq!(all.len(), 9, "{}", inst.trace());
    assert_eq!(all[8].0, 0);
}

#[test]
fn ping_and_reflect_take_their_settings_from_a_config_file() {
    if !hoptrace_netns::require_privileges(
        "ping_and_reflect_take_their_settings_from_a_config_file",
    ) {
        return;
    }
    let p = pair("pgc");
    let dir = ScratchDir::new("epg");
    let cfg = dir.path().join("ends.toml");
    std::fs::write(
        &cfg,
        "[ping]\niface = \"va\"\npeer = \"02:00:00:00:00:0b\"\ncount = 300\ninterval = \"1ms\"\n\n[reflect]\niface = \"vb\"\n",
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let r = start(&p.b, &["reflect", "--config", cfg]);
    r.wait_for("ready on vb", Duration::from_secs(20));
    let out = run(&p.a, &["ping", "--config", cfg]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}");
    let l = ping_line(&text, "sent ");
    assert_eq!(
        (field(l, "sent"), field(l, "received")),
        (300, 300),
        "{text}"
    );
    // A flag overrides the file.
    let out = run(&p.a, &["ping", "--config", cfg, "--count", "120"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let l = ping_line(&text, "sent ");
    assert_eq!(
        (field(l, "sent"), field(l, "received")),
        (120, 120),
        "{text}"
    );
}
