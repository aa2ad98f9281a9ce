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
            s.lines().any(|l| l.split_whitespace().nth(1) == Some(hop)),
            "{hop} missing in:\n{s}"
        );
    }
    assert!(s.contains("skb:skb_copy_datagram_iovec"));
}

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

    let out = hoptrace(&["trace", "--iface", "ht-no-such-if0", "--duration", "1s"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no interface `ht-no-such-if0`"), "{err}");

    let out = hoptrace(&["trace", "--filter", "tcp port 80", "--duration", "1s"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unsupported --filter"));
}
