//! `hoptrace trace` command line: catalogue, backends, clear errors.

use std::process::Command;

fn hoptrace(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hoptrace"))
        .args(args)
        .output()
        .expect("run hoptrace")
}

#[test]
fn trace_list_hops_prints_the_catalogue() {
    let out = hoptrace(&["trace", "--list-hops"]);
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    for hop in [
        "rx",
        "fwd",
        "tap_xmit",
        "consumer_copy",
        "egress",
        "nic_rx",
        "sock_deliver",
        "app_copy",
    ] {
        assert!(
            s.lines()
                .any(|l| l.split_whitespace().nth(1) == Some("inbound")
                    && l.split_whitespace().nth(2) == Some(hop)),
            "{hop} missing as an inbound hop in:\n{s}"
        );
    }
    for hop in ["tap_rx", "uplink_fwd", "uplink_xmit"] {
        assert!(
            s.lines().any(|l| l.starts_with("hypervisor outbound")
                && l.split_whitespace().nth(2) == Some(hop)),
            "{hop} missing as an outbound hop in:\n{s}"
        );
    }
    assert!(s.contains("skb:skb_copy_datagram_iovec"));
    // The predicates are said in words, not as the program's type names.
    for type_name in [
        "TracedNonTapDevice",
        "TapDevice",
        "TracedDevice",
        "TrackedSkb",
    ] {
        assert!(!s.contains(type_name), "{type_name} in:\n{s}");
    }
    assert!(s.contains("a traced device, not a tap"), "{s}");
}

#[test]
fn trace_linger_out_of_range_is_refused_before_tracing() {
    for bad in ["0", "120s"] {
        let out = hoptrace(&["trace", "--linger", bad, "--duration", "1s"]);
        assert!(!out.status.success(), "--linger {bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("--linger `{bad}` is out of range: use 1ms to 60s")),
            "--linger {bad}: {err}"
        );
    }
}

/// Tears the lab down even when the test fails.
struct Lab(&'static str);
impl Drop for Lab {
    fn drop(&mut self) {
        let _ = hoptrace(&["lab", "down", self.0]);
    }
}

/// `lab up bridge --name NAME`, torn down when the guard drops.
fn bridge_lab(name: &'static str) -> Lab {
    crate::lab_common::clear_leftover(name);
    let up = hoptrace(&["lab", "up", "bridge", "--name", name]);
    let lab = Lab(name);
    assert!(
        up.status.success(),
        "lab up: {}",
        String::from_utf8_lossy(&up.stderr)
    );
    lab
}

/// `hoptrace trace --plain` on the lab's in0 and tap0 with `extra`
/// options, started in its hypervisor namespace; returns once the probes
/// had 3 s to attach.
fn start_tracer(lab: &Lab, extra: &[&str]) -> std::process::Child {
    let hyp = format!("ht-{}-hyp", lab.0);
    let exe = env!("CARGO_BIN_EXE_hoptrace");
    let tracer = Command::new("ip")
        .args([
            "netns", "exec", &hyp, exe, "trace", "--plain", "--netns", &hyp,
        ])
        .args(["--iface", "in0", "--iface", "tap0"])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the tracer");
    std::thread::sleep(std::time::Duration::from_secs(3));
    tracer
}

/// Wait for the tracer; it must succeed. Its exit summary.
/// `sv publish` of 2 streams x 500 samples at 1000/s from the lab's `pub`.
fn publish_two_streams_of_500(exe: &str, lab: &str) {
    let publ = hoptrace(&[
        "lab",
        "exec",
        lab,
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
        "1000",
        "--samples",
        "500",
    ]);
    assert!(
        publ.status.success(),
        "publish: {}",
        String::from_utf8_lossy(&publ.stderr)
    );
}

fn tracer_summary(tracer: std::process::Child) -> String {
    let out = tracer.wait_with_output().expect("tracer output");
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{s}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s[s.find("=== summary").expect("summary")..].to_string()
}

/// `--kernel-stats` cannot record (no per-packet records reach user space)
/// nor count timelines, nor name the hypervisor's hops without a device
/// filter: refused with what to do instead, before any probe is loaded.
#[test]
fn trace_kernel_stats_refuses_record_and_count() {
    let dir = std::env::temp_dir().join(format!("ht-ks-refused-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    let out = hoptrace(&["trace", "--kernel-stats", "--plain", "--record", d]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--kernel-stats sends no per-packet record")
            && err.contains("nothing to --record"),
        "{err}"
    );
    assert!(!dir.exists(), "no recording directory created");
    let out = hoptrace(&["trace", "--kernel-stats", "--plain", "--count", "10"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("use --duration"), "{err}");
    // without a device filter the kernel cannot tell a tap from another
    // device, so it could not name rx, fwd and egress
    let out = hoptrace(&["trace", "--kernel-stats", "--plain", "--duration", "1s"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tells the taps from the other devices")
            && err.contains("--netns NS or --iface DEV"),
        "{err}"
    );
}

/// Two control blocks of one merging unit, untagged, 4000 samples/s.
const TWO_BLOCKS_SCD: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<SCL xmlns="http://www.iec.ch/61850/2003/SCL" version="2007" revision="B" release="4">
  <Communication><SubNetwork name="PB"><ConnectedAP iedName="MU01" apName="AP1">
    <SMV ldInst="MU" cbName="SV1"><Address>
      <P type="MAC-Address">01-0C-CD-04-00-01</P><P type="APPID">4001</P>
    </Address></SMV>
    <SMV ldInst="MU" cbName="SV2"><Address>
      <P type="MAC-Address">01-0C-CD-04-00-02</P><P type="APPID">4002</P>
    </Address></SMV>
  </ConnectedAP></SubNetwork></Communication>
  <IED name="MU01"><AccessPoint name="AP1"><Server><LDevice inst="MU"><LN0 lnClass="LLN0" inst="">
    <SampledValueControl name="SV1" smvID="MU01SV1" confRev="1" smpRate="80" nofASDU="1"><SmvOpts/></SampledValueControl>
    <SampledValueControl name="SV2" smvID="MU01SV2" confRev="1" smpRate="80" nofASDU="1"><SmvOpts/></SampledValueControl>
  </LN0></LDevice></Server></AccessPoint></IED>
</SCL>
"#;

/// Tests that need root (namespaces, AF_PACKET, BPF): run serially.
mod privileged {
    use super::*;

    #[test]
    fn trace_list_backends_and_wrong_iface() {
        if !hoptrace_netns::require_privileges("trace_list_backends_and_wrong_iface") {
            return;
        }
        let out = hoptrace(&["trace", "--list-backends"]);
        let s = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{s} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(s.contains("net:netif_receive_skb"), "{s}");
        assert!(
            s.lines()
                .any(|l| l.trim_start().starts_with("tp_btf") && l.contains("loads")),
            "{s}"
        );
        // tp_btf loads here, so it is the one `trace` uses, and the listing says so.
        assert!(
            s.lines()
                .any(|l| l.starts_with("used by `hoptrace trace`: tp_btf ")),
            "{s}"
        );

        let out = hoptrace(&["trace", "--iface", "ht-no-such-if0", "--duration", "1s"]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no interface `ht-no-such-if0`"), "{err}");

        let out = hoptrace(&["trace", "--filter", "tcp port 80", "--duration", "1s"]);
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("unsupported --filter"));
    }

    #[test]
    fn trace_list_backends_reports_fentry_and_kprobe_probes() {
        if !hoptrace_netns::require_privileges(
            "trace_list_backends_reports_fentry_and_kprobe_probes",
        ) {
            return;
        }
        let out = hoptrace(&["trace", "--list-backends"]);
        let s = String::from_utf8_lossy(&out.stdout);
        for backend in ["fentry", "kprobe"] {
            let line = s
                .lines()
                .find(|l| l.trim_start().starts_with(backend))
                .unwrap_or_else(|| panic!("no {backend} line in:\n{s}"));
            assert!(
                line.contains("usable") || line.contains("refused at"),
                "{backend}: neither usable nor refused with a reason: {line}"
            );
        }
    }

    /// `--hops` and `--stream` restrict the output: on the bridge lab with two
    /// streams, tracing `--stream HOPTRACE_SV1 --hops rx,consumer_copy` shows
    /// only that stream and only the rx..consumer_copy stage (plus end_to_end),
    /// with one timeline per published frame of it and no lost event.
    #[test]
    fn trace_hops_and_stream_restrict_the_output() {
        if !hoptrace_netns::require_privileges("trace_hops_and_stream_restrict_the_output") {
            return;
        }
        let lab = bridge_lab("trcli");
        let tracer = start_tracer(
            &lab,
            &[
                "--hops",
                "rx,consumer_copy",
                "--stream",
                "HOPTRACE_SV1",
                "--duration",
                "8s",
            ],
        );
        let exe = env!("CARGO_BIN_EXE_hoptrace");
        publish_two_streams_of_500(exe, "trcli");
        let summary = tracer_summary(tracer);
        assert!(summary.contains("stream HOPTRACE_SV1: ok 500"), "{summary}");
        assert!(!summary.contains("HOPTRACE_SV0"), "--stream: {summary}");
        assert!(summary.contains("rx..consumer_copy"), "{summary}");
        // The stage rows (`  STAGE  n COUNT ...`), not the tracer's notes:
        // a note may name a hop (`tap transmits that returned after the
        // reader had copied ... (tap_xmit stamped from its start)`) when the
        // kernel ran them in that order.
        let stage_rows: Vec<&str> = summary
            .lines()
            .filter(|l| l.starts_with("  ") && !l.trim_start().starts_with("k "))
            .filter(|l| l.split_whitespace().nth(1) == Some("n"))
            .collect();
        assert!(
            stage_rows.iter().any(|l| l.contains("rx..consumer_copy")),
            "stage rows found: {summary}"
        );
        for hidden in ["rx..fwd", "fwd..", "tap_xmit", "..egress"] {
            assert!(
                !stage_rows.iter().any(|l| l.contains(hidden)),
                "--hops shows {hidden}: {summary}"
            );
        }
        assert!(summary.contains("timelines 500 "), "{summary}");
        assert!(
            summary.contains(
                "lost events per tracepoint: netif_receive_skb=0 net_dev_start_xmit=0 net_dev_xmit=0"
            ),
            "{summary}"
        );
    }

    /// `--filter` follows other traffic along the path: UDP datagrams sent by
    /// the kernel's UDP stack (checksum offloaded, filled in before the tap)
    /// keep one identity from `rx` to `consumer_copy`: one complete timeline
    /// per datagram.
    #[test]
    fn trace_filter_follows_udp_datagrams() {
        if !hoptrace_netns::require_privileges("trace_filter_follows_udp_datagrams") {
            return;
        }
        let lab = bridge_lab("trflt");
        let tracer = start_tracer(
            &lab,
            &["--filter", "ether proto 0x0800", "--duration", "6s"],
        );
        let send = Command::new("ip")
            .args(["netns", "exec", "ht-trflt-pub", "bash", "-c"])
            .arg("for i in 1 2 3 4 5; do echo x$i > /dev/udp/10.203.0.2/9999; sleep 0.1; done")
            .status()
            .expect("send UDP");
        assert!(send.success());
        let summary = tracer_summary(tracer);
        assert!(
            summary.contains("stream ether 0x0800 dst 02:68:74:00:00:02: ok 5 incomplete 0"),
            "{summary}"
        );
        assert!(summary.contains("rx..fwd"), "{summary}");
    }

    /// `--kernel-stats --plain` on the bridge lab with two streams of 500
    /// frames: one block per stream with event mode's stages, named as there
    /// (rx..fwd, fwd..tap_xmit, fwd..consumer_copy, end_to_end), each counting
    /// every frame, and no event sent to user space.
    #[test]
    fn trace_kernel_stats_plain_prints_per_stream_rows() {
        if !hoptrace_netns::require_privileges("trace_kernel_stats_plain_prints_per_stream_rows") {
            return;
        }
        crate::lab_common::clear_leftover("trks");
        let up = hoptrace(&["lab", "up", "bridge", "--name", "trks"]);
        let _lab = Lab("trks");
        assert!(
            up.status.success(),
            "lab up: {}",
            String::from_utf8_lossy(&up.stderr)
        );
        let exe = env!("CARGO_BIN_EXE_hoptrace");
        let tracer = Command::new("ip")
            .args(["netns", "exec", "ht-trks-hyp", exe, "trace", "--plain"])
            .args(["--kernel-stats", "--threshold", "1s"])
            .args([
                "--netns",
                "ht-trks-hyp",
                "--iface",
                "in0",
                "--iface",
                "tap0",
            ])
            .args(["--duration", "8s"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start the tracer");
        std::thread::sleep(std::time::Duration::from_secs(3));
        publish_two_streams_of_500(exe, "trks");
        let out = tracer.wait_with_output().expect("tracer output");
        let s = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{s}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let summary = &s[s.find("=== summary").expect("summary")..];
        assert!(
            summary.contains("kernel stats (no per-packet events"),
            "{summary}"
        );
        for stream in ["HOPTRACE_SV0", "HOPTRACE_SV1"] {
            let at = summary
                .find(&format!("stream {stream}: dropped 0"))
                .unwrap_or_else(|| panic!("no row of {stream}: {summary}"));
            let block: Vec<&str> = summary[at..]
                .lines()
                .skip(1)
                .take_while(|l| l.starts_with("  "))
                .collect();
            // `all: n N` of a stage row (0 when the stage has no row).
            let count = |stage: &str| -> u64 {
                block
                    .iter()
                    .find(|l| l.trim_start().starts_with(stage))
                    .and_then(|l| l.split("all: n").nth(1))
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0)
            };
            // Event mode's stages, named as there, each counting every frame:
            // rx..fwd across the bridge's clone, fwd..tap_xmit timed from fwd
            // whichever came first of the tap's xmit event and the reader's
            // copy, and end_to_end from rx to the copy.
            for stage in [
                "rx..fwd",
                "fwd..tap_xmit",
                "fwd..consumer_copy",
                "end_to_end",
            ] {
                let row = block
                    .iter()
                    .find(|l| l.trim_start().starts_with(stage))
                    .unwrap_or_else(|| panic!("{stream}: no {stage} row: {summary}"));
                assert!(row.contains(">1.000 s:0"), "{row}");
                assert!(row.contains(" worst ") && row.contains("smpCnt"), "{row}");
                assert!(
                    row.contains(" (+") || row.contains(" after the start"),
                    "the worst packet's time is readable: {row}"
                );
                assert_eq!(count(stage), 500, "{stream} {stage}: {block:#?}");
            }
        }
        for raw in [
            "netif_receive_skb..",
            "net_dev_start_xmit..",
            "net_dev_xmit..",
            "tap_xmit..consumer_copy",
        ] {
            assert!(
                !summary.contains(raw),
                "no tracepoint pair {raw}: {summary}"
            );
        }
        // The count line says what the kernel counted, not "events 0 ...
        // timelines 0" as if nothing had been traced.
        let counted = summary
            .lines()
            .find(|l| l.starts_with("kernel stats: "))
            .unwrap_or_else(|| panic!("no kernel stats count line: {summary}"));
        assert!(counted.contains(" in 2 stream(s), "), "{counted}");
        assert!(counted.contains(" 0 dropped (0 drop records)"), "{counted}");
        let observations: u64 = counted
            .split(", ")
            .find_map(|part| part.strip_suffix(" stage observations")?.parse().ok())
            .unwrap_or_else(|| panic!("no observation count: {counted}"));
        assert_eq!(observations, 4000, "2 streams x 4 stages x 500: {counted}");
        assert!(!summary.contains("timelines 0"), "{summary}");
    }

    /// `--scl` selects the file's streams by their whole key and names what
    /// differs: with SV1 published from the file and a numbered stream next to
    /// it, the tracer keeps SV1's 500 timelines, names SV2 as missing and
    /// HOPTRACE_SV0 as unexpected, and `--expect-streams` exits with status 4 (streams differ).
    #[test]
    fn trace_with_an_scl_file_keeps_its_streams_and_names_the_missing_and_unexpected_ones() {
        if !hoptrace_netns::require_privileges(
            "trace_with_an_scl_file_keeps_its_streams_and_names_the_missing_and_unexpected_ones",
        ) {
            return;
        }
        let dir = std::env::temp_dir().join(format!("ht-trace-scl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let scd = dir.join("mu01.scd");
        std::fs::write(&scd, TWO_BLOCKS_SCD).unwrap();
        let scd = scd.to_str().unwrap().to_string();
        let lab = bridge_lab("trscl");
        let tracer = start_tracer(
            &lab,
            &["--scl", &scd, "--expect-streams", "--duration", "8s"],
        );
        let exe = env!("CARGO_BIN_EXE_hoptrace");
        for how in [
            vec!["--scl", scd.as_str(), "--svcb", "SV1"],
            vec!["--streams", "1"],
        ] {
            let mut a = vec!["lab", "exec", "trscl", "pub", "--", exe, "sv", "publish"];
            a.extend(["--iface", "eth0", "--samples", "500"]);
            a.extend(how);
            let publ = hoptrace(&a);
            assert!(
                publ.status.success(),
                "publish: {}",
                String::from_utf8_lossy(&publ.stderr)
            );
        }
        let out = tracer.wait_with_output().expect("tracer output");
        let _ = std::fs::remove_dir_all(&dir);
        let text = String::from_utf8_lossy(&out.stdout);
        let streams_differ = i32::from(hoptrace_os::Exit::StreamsDiffer.code());
        assert_eq!(out.status.code(), Some(streams_differ), "{text}");
        let at = text.find("=== summary").expect("summary");
        // Every second: the configured streams seen so far.
        assert!(
            text[..at].contains("configured streams: expected 2: present 1, unexpected 1"),
            "{text}"
        );
        let summary = &text[at..];
        assert!(summary.contains("stream MU01SV1: ok 500"), "{summary}");
        assert!(summary.contains("timelines 500 "), "{summary}");
        let lines: Vec<&str> = summary
            .lines()
            .skip_while(|l| !l.starts_with("configured streams:"))
            .take(3)
            .collect();
        assert_eq!(
            lines,
            [
                "configured streams: expected 2: present 1, unexpected 1; 2 problem(s):",
                "  MU01SV2 (01:0c:cd:04:00:02 0x4002): missing: none seen",
                "  HOPTRACE_SV0 (01:0c:cd:04:00:00 0x4000): unexpected: 500 timelines of a stream that is not configured",
            ],
            "{summary}"
        );
    }

    /// `--cpu 0`: every thread of the tracer (the ring reader, the metrics
    /// server, the explainer) may run on CPU 0 only, while it traces; a CPU
    /// list that does not parse is refused before anything is attached.
    #[test]
    fn trace_cpu_keeps_every_tracer_thread_on_the_cpus_given() {
        if !hoptrace_netns::require_privileges(
            "trace_cpu_keeps_every_tracer_thread_on_the_cpus_given",
        ) {
            return;
        }
        let bad = hoptrace(&["trace", "--cpu", "0-x", "--duration", "1s"]);
        assert!(!bad.status.success());
        assert!(
            String::from_utf8_lossy(&bad.stderr).contains("`0-x`"),
            "{}",
            String::from_utf8_lossy(&bad.stderr)
        );
        let lab = bridge_lab("trcpu");
        let tracer = start_tracer(
            &lab,
            &[
                "--cpu",
                "0",
                "--explain",
                "1ms",
                "--metrics",
                "9477",
                "--duration",
                "6s",
            ],
        );
        // `ip netns exec` execs the tracer: the child's pid is the tracer's.
        let pid = tracer.id();
        let mut allowed = Vec::new();
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
            let status = std::fs::read_to_string(task.unwrap().path().join("status")).unwrap();
            let line = status
                .lines()
                .find(|l| l.starts_with("Cpus_allowed_list:"))
                .unwrap()
                .to_string();
            allowed.push(line.split_whitespace().nth(1).unwrap().to_string());
        }
        let summary = tracer_summary(tracer);
        assert!(allowed.len() >= 2, "threads: {allowed:?}");
        assert!(allowed.iter().all(|a| a == "0"), "{allowed:?}\n{summary}");
    }
}

/// A synthetic dump (2 streams of 300 frames, every timeline 20 us from
/// its first hop to its last) replayed with `--on-threshold`: the command
/// runs for the first `--on-threshold-max` timelines over the highest
/// threshold with their time, the rest are counted; `pcap:N` is refused.
#[test]
fn trace_on_threshold_runs_its_command_for_timelines_over_the_highest_threshold_up_to_the_maximum()
{
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("events.dump");
    let synth = hoptrace_trace::synth::Synthetic {
        prefix: "SYN".into(),
        streams: 2,
        rate: 4000,
        frames: 300,
    };
    let f = std::io::BufWriter::new(std::fs::File::create(&dump).unwrap());
    hoptrace_trace::synth::write_dump(&synth, f).unwrap();
    let log = dir.path().join("exec.txt");
    let exec = format!(
        "exec:echo $HOPTRACE_SVID $HOPTRACE_LATENCY_NS >> {}",
        log.display()
    );
    let d = dump.to_str().unwrap();
    let out = hoptrace(&[
        "trace",
        "--replay",
        d,
        "--threshold",
        "5us",
        "10us",
        "--on-threshold",
        &exec,
        "--on-threshold-max",
        "50",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("on-threshold: 600 timelines over 10.0 us (first to last hop); actions run for 50, 550 not acted on"),
        "{text}"
    );
    let lines = std::fs::read_to_string(&log).unwrap();
    assert_eq!(lines.lines().count(), 50, "{lines}");
    assert!(
        lines
            .lines()
            .all(|l| l.starts_with("SYN") && l.ends_with(" 20000")),
        "{lines}"
    );

    let out = hoptrace(&[
        "trace",
        "--replay",
        d,
        "--threshold",
        "5us",
        "--on-threshold",
        "pcap:5",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("sv subscribe --threshold T --on-threshold pcap:5"),
        "{err}"
    );
    let out = hoptrace(&["trace", "--replay", d, "--on-threshold", "pcap:x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pcap:x: give the frames"));
}
