//! `hoptrace sv publish` / `sv subscribe` across a veth pair between two
//! namespaces: counts, losses, identities, tshark decoding, foreign frames,
//! clear errors.

use crate::capture_common;
use crate::endpoints_common;

use std::time::Duration;

use endpoints_common::frames::*;
use endpoints_common::*;

#[test]
fn eight_streams_at_4000_for_10s_arrive_complete() {
    if !hoptrace_netns::require_privileges("eight_streams_at_4000_for_10s_arrive_complete") {
        return;
    }
    let p = pair("svf");
    let sub = start_ready(
        &p.b,
        &args("sv subscribe --iface vb --count 320000 --duration 90s --quiet"),
    );
    let pub_out = run_ok(
        &p.a,
        &args("sv publish --iface va --streams 8 --rate 4000 --samples 40000"),
    );
    let (st, out) = sub.finish(Duration::from_secs(100));
    assert!(st.success());
    assert_complete(&out, 8, 40_000, &pub_out);
    // The publisher says it sent 40000 frames per stream.
    assert_eq!(pub_out.matches(": 40000 frames").count(), 8, "{pub_out}");
    // Default receive path: recvmmsg; the kernel dropped nothing and every
    // frame has its kernel RX stamp.
    assert!(out.contains("receive path: recvmmsg"), "{out}");
    assert!(out.contains("without RX stamp 0 kernel drops 0"), "{out}");
}

#[test]
fn config_files_reference_join_over_three_wraps_refrtm_and_status_lines() {
    if !hoptrace_netns::require_privileges(
        "config_files_reference_join_over_three_wraps_refrtm_and_status_lines",
    ) {
        return;
    }
    // Both ends configured by file only. 2 streams x 12000 samples at
    // 4000/s: 3 s, three smpCnt wraps. The subscriber joins its RX stamps
    // with the publisher's recording on (stream, epoch, smpCnt): every
    // sample must match, none with a negative latency.
    let dir = ScratchDir::new("epc");
    let pub_rec = dir.path().join("pub");
    let pub_cfg = dir.path().join("pub.toml");
    let sub_cfg = dir.path().join("sub.toml");
    std::fs::write(
        &pub_cfg,
        format!(
            "[publish]\niface = \"va\"\nstreams = 2\nrate = 4000\nsamples = 12000\nrefrtm = true\nrecord = {:?}\n",
            pub_rec.to_str().unwrap()
        ),
    )
    .unwrap();
    std::fs::write(
        &sub_cfg,
        format!(
            "[subscribe]\niface = \"vb\"\nduration = \"60s\"\nrx_mode = \"ring\"\nreference = {:?}\n",
            pub_rec.to_str().unwrap()
        ),
    )
    .unwrap();
    let p = pair("svc");
    let sub = start_ready(
        &p.b,
        &["sv", "subscribe", "--config", sub_cfg.to_str().unwrap()],
    );
    run_ok(
        &p.a,
        &["sv", "publish", "--config", pub_cfg.to_str().unwrap()],
    );
    let log = sub.stderr_log.clone();
    let (st, out) = interrupt(sub, Duration::from_millis(500), Duration::from_secs(30));
    assert!(st.success(), "{out}");
    let total = total_line(&out);
    assert_eq!(field(&total, "received"), 24_000, "{out}");
    assert_eq!(field(&total, "lost"), 0, "{out}");
    let join = out
        .lines()
        .find(|l| l.starts_with("end-to-end T3 - T0"))
        .unwrap_or_else(|| panic!("no join line: {out}"));
    assert!(join.contains("on stream+epoch+smpCnt"), "{join}");
    assert!(join.contains("HOPTRACE_SV0:+0 HOPTRACE_SV1:+0"), "{join}");
    assert_eq!(field(join, "matched"), 24_000, "{join}");
    assert_eq!(field(join, "unmatched"), 0, "{join}");
    assert!(!join.contains("negative"), "{join}");
    // refrTm end to end: one latency per sample, none negative.
    let refr = out
        .lines()
        .find(|l| l.starts_with("end-to-end (T4 - refrTm)"))
        .unwrap_or_else(|| panic!("no refrTm line: {out}"));
    assert!(refr.contains("n=24000 "), "{refr}");
    assert!(!refr.contains("negative"), "{refr}");
    // One status line per second while running (>= 3 s of traffic).
    let status = log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with("streams ") && l.contains(" kernel drops "))
        .count();
    assert!(status >= 2, "{:?}", log.lock().unwrap());
}

#[test]
fn replay_keeps_the_capture_timing_and_continues_smpcnt_across_loops() {
    if !hoptrace_netns::require_privileges(
        "replay_keeps_the_capture_timing_and_continues_smpcnt_across_loops",
    ) {
        return;
    }
    // 6 frames (2 ASDUs each) at irregular offsets, replayed twice. The
    // second loop starts one mean gap (800/5 = 160 ms) after the last frame.
    let offsets_ms = [0u64, 100, 150, 400, 450, 800];
    let dir = ScratchDir::new("epr");
    let cap = dir.path().join("irregular.pcap");
    let rec = dir.path().join("sub");
    let frames: Vec<Vec<u8>> = (0..6u16)
        .map(|k| libiec61850_like_frame("MU02", 2 * k, 0x4002))
        .collect();
    write_pcap_at(&cap, &frames, &offsets_ms.map(|o| o * 1_000_000));
    let p = pair("svp");
    let sub = start_ready(
        &p.b,
        &args(&format!(
            "sv subscribe --iface vb --count 24 --duration 30s --quiet --record {}",
            rec.display()
        )),
    );
    run_ok(
        &p.a,
        &args(&format!(
            "sv publish --iface va --replay {} --loop 2",
            cap.display()
        )),
    );
    let (_, out) = sub.finish(Duration::from_secs(40));
    let streams = stream_lines(&out);
    assert_eq!(streams.len(), 1, "{out}");
    assert_eq!((streams[0].received, streams[0].lost), (24, 0), "{out}");
    let r = hoptrace_record::RecordingReader::open(&rec).unwrap();
    let rows: Vec<_> = r.rows().unwrap().map(|x| x.unwrap()).collect();
    let meta = r.meta().clone();
    // smpCnt runs 0..23 without a break across the loop boundary.
    let smp: Vec<u16> = rows.iter().map(|r| r.smp_cnt.unwrap()).collect();
    assert_eq!(smp, (0..24).collect::<Vec<u16>>());
    // Arrival offsets (first ASDU of each frame) follow the capture.
    let t: Vec<i64> = rows
        .iter()
        .step_by(2)
        .map(|r| r.hop(&meta, "rx").unwrap())
        .collect();
    let span = 800 + 160;
    let want: Vec<i64> = (0..2)
        .flat_map(|l| {
            offsets_ms
                .iter()
                .map(move |&o| (l * span + o as i64) * 1_000_000)
        })
        .collect();
    for (i, (&got, &w)) in t.iter().zip(&want).enumerate() {
        let err = (got - t[0]) - w;
        assert!(
            err.abs() < 30_000_000,
            "frame {i}: {} ms vs {} ms",
            (got - t[0]) / 1_000_000,
            w / 1_000_000
        );
    }
}

#[test]
fn a_publisher_gap_shows_as_equal_losses_on_every_stream() {
    if !hoptrace_netns::require_privileges("a_publisher_gap_shows_as_equal_losses_on_every_stream")
    {
        return;
    }
    // The publisher (`--late skip`, like a merging unit whose sampling
    // clock keeps running) is stopped with SIGSTOP for 400 ms in the middle
    // of a 3 s run: the instants it slept through are skipped. Whatever the
    // stop instant, every stream must show received + skipped = 12000 and
    // the same loss (at most the skipped instants), nothing duplicated or
    // reordered. (A 1 s gap at 4000/s would be exactly one smpCnt wrap,
    // invisible in smpCnt.)
    let p = pair("svg");
    let sub = start_ready(
        &p.b,
        &args("sv subscribe --iface vb --duration 60s --quiet"),
    );
    let publ = start(
        &p.a,
        &args("sv publish --iface va --streams 4 --samples 12000 --late skip"),
    );
    pause(
        &publ,
        Duration::from_millis(1200),
        Duration::from_millis(400),
    );
    let (st, pub_out) = publ.finish(Duration::from_secs(30));
    assert!(st.success(), "{pub_out}");
    let (_, out) = interrupt(sub, Duration::from_millis(300), Duration::from_secs(20));
    let streams = stream_lines(&out);
    assert_eq!(streams.len(), 4, "{out}");
    // The publisher skipped the instants it slept through (`--late skip`);
    // every other sample arrived. The subscriber sees a skipped instant as
    // lost unless it is at the very end (nothing follows to reveal the gap:
    // on a loaded machine the last instants can be late too).
    let skipped: u64 = pub_out
        .split("skipped ")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `skipped N` in the publisher's summary: {pub_out}"));
    let lost0 = streams[0].lost;
    assert!(lost0 > 0, "{out}");
    assert!(
        lost0 <= skipped,
        "lost {lost0} > skipped {skipped}\n{pub_out}\n{out}"
    );
    for s in &streams {
        assert_eq!(s.received + skipped, 12_000, "{s:?}\n{pub_out}\n{out}");
        assert_eq!(s.lost, lost0, "{out}");
        assert_eq!(s.duplicated, 0, "{out}");
        assert_eq!(s.reordered, 0, "{out}");
    }
}

#[test]
fn published_frames_decode_in_tshark() {
    if !hoptrace_netns::require_privileges("published_frames_decode_in_tshark") {
        return;
    }
    let p = pair("svt");
    let dir = ScratchDir::new("ept");
    let pcap = dir.path().join("cap.pcap");
    let mut tcpdump =
        p.b.command("tcpdump")
            .args([
                "-i",
                "vb",
                "-w",
                pcap.to_str().unwrap(),
                "-U",
                // every frame handed over at once, not when a 1 s ring
                // block times out (a SIGINT before that loses the block)
                "--immediate-mode",
                "ether proto 0x88ba or vlan",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
    let tcpdump_err = capture_common::until_listening(&mut tcpdump, "vb");
    run_ok(
        &p.a,
        &args("sv publish --iface va --streams 2 --asdu 2 --samples 200 --refrtm"),
    );
    std::thread::sleep(Duration::from_millis(500));
    let _ = std::process::Command::new("kill")
        .args(["-INT", &tcpdump.id().to_string()])
        .status();
    let _ = tcpdump.wait();
    let tcpdump_err = tcpdump_err.join().unwrap();
    let count = |filter: &str| -> usize {
        let out = std::process::Command::new("tshark")
            .args(["-r", pcap.to_str().unwrap(), "-Y", filter])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tshark -Y {filter}: {}\ntcpdump: {tcpdump_err}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    // 2 streams x 100 frames (2 ASDUs each).
    assert_eq!(
        count("sv"),
        200,
        "tcpdump: {tcpdump_err}; capture of {:?} bytes",
        std::fs::metadata(&pcap).map(|m| m.len())
    );
    assert_eq!(count("_ws.malformed"), 0);
    assert_eq!(count("sv.smpCnt == 199"), 2);
    let fields = std::process::Command::new("tshark")
        .args([
            "-r",
            pcap.to_str().unwrap(),
            "-T",
            "fields",
            "-e",
            "sv.svID",
            "-Y",
            "sv",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&fields.stdout);
    assert!(
        text.contains("HOPTRACE_SV0") && text.contains("HOPTRACE_SV1"),
        "{text}"
    );
}

#[test]
fn subscriber_decodes_frames_of_another_stack_replayed_in_a_loop() {
    if !hoptrace_netns::require_privileges(
        "subscriber_decodes_frames_of_another_stack_replayed_in_a_loop",
    ) {
        return;
    }
    // 50 frames x 2 ASDUs of stream "MU01" (smpCnt 0..99), replayed 3 times:
    // smpCnt must continue (100..299), so 300 samples, nothing lost.
    let dir = ScratchDir::new("ept");
    let cap = dir.path().join("foreign.pcap");
    let frames: Vec<Vec<u8>> = (0..50u16)
        .map(|k| libiec61850_like_frame("MU01", 2 * k, 0x4001))
        .collect();
    write_pcap(&cap, &frames, 500_000);
    let p = pair("svo");
    let sub = start_ready(
        &p.b,
        &args("sv subscribe --iface vb --count 300 --duration 30s --quiet"),
    );
    run_ok(
        &p.a,
        &args(&format!(
            "sv publish --iface va --replay {} --loop 3",
            cap.display()
        )),
    );
    let (_, out) = sub.finish(Duration::from_secs(40));
    assert!(out.contains("malformed 0"), "{out}");
    let streams = stream_lines(&out);
    assert_eq!(streams.len(), 1, "{out}");
    assert_eq!(streams[0].name, "MU01");
    assert_eq!(streams[0].received, 300, "{out}");
    assert_eq!(streams[0].lost, 0, "{out}");
    assert_eq!(streams[0].duplicated, 0, "{out}");
}

#[test]
fn missing_and_down_interfaces_are_explained() {
    if !hoptrace_netns::require_privileges("missing_and_down_interfaces_are_explained") {
        return;
    }
    let p = pair("sve");
    let out = run(
        &p.b,
        &["sv", "subscribe", "--iface", "nosuch0", "--count", "1"],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "no interface `nosuch0` in network namespace `{}` (interfaces there: lo, vb): \
             check the name with `ip -n {} -br link`",
            p.b.name(),
            p.b.name()
        )),
        "{err}"
    );
    p.b.ip(&["link", "set", "vb", "down"]).unwrap();
    let out = run(&p.b, &["sv", "publish", "--iface", "vb", "--samples", "1"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("interface vb is down"), "{err}");
    let out = run(&p.a, &["ping", "--iface", "va/x"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not valid"));
    let out = run(&p.b, &["reflect", "--iface", "vb"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("interface vb is down: bring it up with `ip link set vb up`"),
        "{err}"
    );
    // Without privileges (no root, no capabilities): the message names
    // the capability.
    for args in [
        &["sv", "subscribe", "--iface", "va", "--count", "1"][..],
        &["sv", "publish", "--iface", "va", "--samples", "1"][..],
        &["ping", "--iface", "va", "--count", "1"][..],
    ] {
        let out = std::process::Command::new("ip")
            .args([
                "netns",
                "exec",
                p.a.name(),
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
            ])
            .args([
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                BIN,
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("needs root or CAP_NET_RAW"), "{args:?}: {err}");
    }
    // A config file with a typo is refused, naming the file.
    let dir = ScratchDir::new("epe");
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, "[subscribe]\nifase = \"vb\"\n").unwrap();
    let out = run(
        &p.b,
        &["sv", "subscribe", "--config", cfg.to_str().unwrap()],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml is not valid") && err.contains("ifase"),
        "{err}"
    );
}

#[test]
fn subscriber_decodes_frames_published_by_libiec61850() {
    if !hoptrace_netns::require_privileges("subscriber_decodes_frames_published_by_libiec61850") {
        return;
    }
    // libiec61850's own SVPublisher (C library in the pyiec61850-ng wheel,
    // installed by scripts/setup.sh) encodes and sends 600 samples.
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/cli/endpoints_common/libiec61850_sv.py"
    );
    let dir = ScratchDir::new("epl");
    let rec = dir.path().join("sub");
    let p = pair("svl");
    let sub = start_ready(
        &p.b,
        &args(&format!(
            "sv subscribe --iface vb --count 600 --duration 60s --quiet --record {}",
            rec.display()
        )),
    );
    let out =
        p.a.command("python3")
            .args([script, "va", "600", "MU_LIBIEC", "0x4010"])
            .output()
            .unwrap();
    assert!(
        out.status.success(),
        "libiec61850 publisher failed (pyiec61850-ng missing? run scripts/setup.sh): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, text) = sub.finish(Duration::from_secs(60));
    assert!(text.contains("malformed 0"), "{text}");
    let streams = stream_lines(&text);
    assert_eq!(streams.len(), 1, "{text}");
    assert_eq!(streams[0].name, "MU_LIBIEC", "{text}");
    assert_eq!((streams[0].received, streams[0].lost), (600, 0), "{text}");
    let r = hoptrace_record::RecordingReader::open(&rec).unwrap();
    let smp: Vec<u16> = r
        .rows()
        .unwrap()
        .map(|x| x.unwrap().smp_cnt.unwrap())
        .collect();
    assert_eq!(smp, (0..600).collect::<Vec<u16>>());
}
