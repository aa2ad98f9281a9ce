//! `--xdp` (AF_XDP sockets fed by an XDP program) and `--busy-poll` (a
//! spinning reader) of `sv subscribe`, `ping` and `reflect` across a veth
//! pair: every frame of a known count received, every request answered once,
//! the XDP program gone after the endpoint exits (also after SIGKILL), and
//! the errors said clearly.

use crate::endpoints_common;

use std::time::{Duration, Instant};

use endpoints_common::*;
use hoptrace_netns::Netns;

fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in {out}"))
}

/// `ip link show dev IFACE` in `ns` (an attached XDP program shows as
/// `xdp` with its id).
/// `ping`'s output, after checking it exited 0 and its summary line says
/// `count` sent and received, none lost or duplicated.
fn every_request_answered_once(out: &std::process::Output, count: u64) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let l = line(&text, "sent ");
    assert_eq!(field(l, "sent"), count, "{text}");
    assert_eq!(field(l, "received"), count, "{text}");
    assert_eq!(field(l, "lost"), 0, "{text}");
    assert_eq!(field(l, "duplicated"), 0, "{text}");
    text
}

fn link_show(ns: &Netns, iface: &str) -> String {
    let out = ns.ip(&["link", "show", "dev", iface]).unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Wait (up to 3 s: the kernel releases the link when the process's files
/// are closed) until `iface` has no XDP program; the last `ip link` output.
fn wait_no_xdp(ns: &Netns, iface: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let s = link_show(ns, iface);
        if !s.contains("xdp") || Instant::now() > deadline {
            return s;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_xdp_subscriber_receives_every_tagged_frame_and_detaches_on_exit() {
    if !hoptrace_netns::require_privileges(
        "an_xdp_subscriber_receives_every_tagged_frame_and_detaches_on_exit",
    ) {
        return;
    }
    let p = pair("xsv");
    let sub = start_ready(
        &p.b,
        &args("sv subscribe --iface vb --xdp --count 8000 --duration 60s --quiet"),
    );
    assert!(
        sub.stderr().contains("AF_XDP on vb queue 0"),
        "{}",
        sub.stderr()
    );
    assert!(
        link_show(&p.b, "vb").contains("xdp"),
        "{}",
        link_show(&p.b, "vb")
    );
    run_ok(
        &p.a,
        &args("sv publish --iface va --streams 2 --rate 4000 --samples 4000 --vlan 100:4"),
    );
    let (st, out) = sub.finish(Duration::from_secs(60));
    assert!(st.success(), "{out}");
    assert_complete(&out, 2, 4000, "subscribe --xdp");
    assert!(
        out.contains("RX stamps: application REALTIME"),
        "stamp source named: {out}"
    );
    assert!(out.contains("receive path: AF_XDP on vb queue 0"), "{out}");
    let after = wait_no_xdp(&p.b, "vb");
    assert!(!after.contains("xdp"), "XDP program left on vb: {after}");
}

#[test]
fn a_busy_polling_subscriber_receives_every_frame() {
    if !hoptrace_netns::require_privileges("a_busy_polling_subscriber_receives_every_frame") {
        return;
    }
    let p = pair("xbs");
    let sub = start_ready(
        &p.b,
        &args("sv subscribe --iface vb --busy-poll 20 --count 8000 --duration 60s --quiet"),
    );
    run_ok(
        &p.a,
        &args("sv publish --iface va --streams 2 --rate 4000 --samples 4000"),
    );
    let (st, out) = sub.finish(Duration::from_secs(60));
    assert!(st.success(), "{out}");
    assert_complete(&out, 2, 4000, "subscribe --busy-poll");
    assert!(
        out.contains("spinning reader") && out.contains("SO_BUSY_POLL 20 us"),
        "{out}"
    );
}

#[test]
fn xdp_ping_and_reflect_answer_every_request_once() {
    if !hoptrace_netns::require_privileges("xdp_ping_and_reflect_answer_every_request_once") {
        return;
    }
    let p = pair("xpg");
    let dir = ScratchDir::new("xpg");
    let rec = dir.path().join("reflect");
    let r = start_ready(
        &p.b,
        &args(&format!(
            "reflect --iface vb --xdp --record {}",
            rec.display()
        )),
    );
    let out = run(
        &p.a,
        &args("ping --iface va --xdp --peer 02:00:00:00:00:0b --count 2000 --interval 200us"),
    );
    let text = every_request_answered_once(&out, 2000);
    assert!(
        text.contains("stamps: application CLOCK_REALTIME"),
        "{text}"
    );
    assert!(line(&text, "path: ").contains("AF_XDP on va"), "{text}");
    assert!(
        !link_show(&p.a, "va").contains("xdp"),
        "ping left its program"
    );
    r.signal("INT");
    let (st, out) = r.finish(Duration::from_secs(20));
    assert!(st.success(), "{out}");
    assert!(
        out.contains("reflected 2000 frames (2000 with a TX stamp)"),
        "{out}"
    );
    // The turnaround is kept per reply: both stamps on every row.
    let rd = hoptrace_record::RecordingReader::open(&rec).unwrap();
    let rows: Vec<_> = rd.rows().unwrap().map(|x| x.unwrap()).collect();
    assert_eq!(rows.len(), 2000);
    let complete = rows
        .iter()
        .filter(|r| r.status == hoptrace_record::PacketStatus::Ok)
        .count();
    assert_eq!(complete, 2000);
    let after = wait_no_xdp(&p.b, "vb");
    assert!(!after.contains("xdp"), "XDP program left on vb: {after}");
}

#[test]
fn the_xdp_program_is_gone_after_the_endpoint_is_killed() {
    if !hoptrace_netns::require_privileges("the_xdp_program_is_gone_after_the_endpoint_is_killed") {
        return;
    }
    let p = pair("xkl");
    let mut r = start_ready(&p.b, &args("reflect --iface vb --xdp"));
    assert!(
        link_show(&p.b, "vb").contains("xdp"),
        "{}",
        link_show(&p.b, "vb")
    );
    r.signal("KILL");
    let _ = r.child.wait();
    let after = wait_no_xdp(&p.b, "vb");
    assert!(
        !after.contains("xdp"),
        "XDP program left after SIGKILL: {after}"
    );
    // The interface is free again: another endpoint attaches, this one
    // asked for AF_XDP by its config file (`xdp = true` in `[reflect]`).
    let dir = ScratchDir::new("xkl");
    let cfg = dir.path().join("reflect.toml");
    std::fs::write(&cfg, "[reflect]\niface = \"vb\"\nxdp = true\n").unwrap();
    let r2 = start_ready(&p.b, &["reflect", "--config", cfg.to_str().unwrap()]);
    assert!(
        r2.stderr().contains("AF_XDP on vb queue 0"),
        "{}",
        r2.stderr()
    );
    assert!(link_show(&p.b, "vb").contains("xdp"));
    drop(r2);
    let after = wait_no_xdp(&p.b, "vb");
    assert!(!after.contains("xdp"), "{after}");
}

#[test]
fn busy_poll_ping_and_reflect_answer_every_request_once() {
    if !hoptrace_netns::require_privileges("busy_poll_ping_and_reflect_answer_every_request_once") {
        return;
    }
    let p = pair("xbp");
    let r = start_ready(&p.b, &args("reflect --iface vb --busy-poll 50"));
    assert!(r.stderr().contains("spinning reader"), "{}", r.stderr());
    let out = run(
        &p.a,
        &args("ping --iface va --busy-poll --peer 02:00:00:00:00:0b --count 2000 --interval 200us"),
    );
    let text = every_request_answered_once(&out, 2000);
    assert!(text.contains("stamps: software CLOCK_REALTIME"), "{text}");
    r.signal("INT");
    let (st, out) = r.finish(Duration::from_secs(20));
    assert!(st.success(), "{out}");
    assert!(out.contains("reflected 2000 frames"), "{out}");
}

#[test]
fn xdp_errors_say_what_is_wrong_and_what_to_do() {
    if !hoptrace_netns::require_privileges("xdp_errors_say_what_is_wrong_and_what_to_do") {
        return;
    }
    let p = pair("xer");
    let out = run(&p.b, &args("reflect --iface nosuch0 --xdp"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no interface `nosuch0`") && err.contains("ip -n"),
        "{err}"
    );
    // A second --xdp endpoint on the same interface: refused, saying why.
    let _r = start_ready(&p.b, &args("reflect --iface vb --xdp"));
    let out = run(&p.b, &args("sv subscribe --iface vb --xdp --count 1"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--xdp") && err.contains("run without --xdp"),
        "{err}"
    );
    // --busy-poll cannot spin on a TPACKET_V3 ring.
    let out = run(
        &p.b,
        &args("sv subscribe --iface vb --rx-mode ring --busy-poll --count 1"),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("use --rx-mode recvmmsg"), "{err}");
}
