//! The AF_PACKET wrapper on a real veth pair between two namespaces made by
//! `hoptrace-netns` (privileged): frames sent on one end arrive at the other
//! as they were sent, VLAN tag included, with a kernel receive stamp; the
//! options (outgoing frames ignored, promiscuous) do what they say; opening
//! a down or missing interface is explained.

use std::sync::mpsc;
use std::time::Duration;

use hoptrace_netns::{require_privileges, unique_name, veth_pair, Netns};
use hoptrace_os::{
    interface_index, InterfaceError, Namespace, PacketSocket, Received, SocketError, ETH_P_ALL,
};

/// Ethertype of the test frames (IEEE 802 local experimental 1).
const ETHERTYPE_TEST: u16 = 0x88B5;
const MARK: &[u8] = b"hoptrace-os-test";

/// A test frame numbered `n`, tagged with VLAN `tci` when given.
fn frame(n: u8, tci: Option<u16>) -> Vec<u8> {
    let mut f = vec![0x03, 0x68, 0x74, 0, 0, 1, 0x02, 0x68, 0x74, 0, 0, 2];
    if let Some(tci) = tci {
        f.extend_from_slice(&0x8100u16.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&ETHERTYPE_TEST.to_be_bytes());
    f.extend_from_slice(MARK);
    f.push(n);
    f.resize(f.len().max(60), 0);
    f
}

fn is_test_frame(wire: &[u8]) -> bool {
    wire.windows(MARK.len()).any(|w| w == MARK)
}

/// Marker of the frames sent until receive stamps are on (below).
const WARM: &[u8] = b"hoptrace-os-warm";

/// A frame that says receive stamps are not known to be on yet.
fn warm_frame() -> Vec<u8> {
    let mut f = frame(0, None);
    let at = f.windows(MARK.len()).position(|w| w == MARK).unwrap();
    f[at..at + WARM.len()].copy_from_slice(WARM);
    f
}

/// Two namespaces joined by a veth pair `ps0` (in `a`) <-> `ps1` (in `b`).
/// Both are removed when the returned guards drop, also when a test fails.
fn pair(tag: &str) -> (Netns, Netns) {
    let a = Netns::create(&unique_name(&format!("{tag}a"))).unwrap();
    let b = Netns::create(&unique_name(&format!("{tag}b"))).unwrap();
    veth_pair(&a, "ps0", &b, "ps1", None, None).unwrap();
    (a, b)
}

/// Receive test frames on `sock` until `n` arrived or nothing came for 5 s.
fn receive_test_frames(sock: &PacketSocket, n: usize) -> Vec<(Received, Vec<u8>)> {
    receive_test_frames_after_warm_up(sock, n, None)
}

/// [`receive_test_frames`], and for each warm-up frame that arrives with
/// a kernel receive stamp a message on `stamped`.
fn receive_test_frames_after_warm_up(
    sock: &PacketSocket,
    n: usize,
    stamped: Option<mpsc::Sender<()>>,
) -> Vec<(Received, Vec<u8>)> {
    let mut buf = vec![0u8; 2048];
    let mut got = Vec::new();
    while got.len() < n {
        match sock.recv(&mut buf, Some(Duration::from_secs(5))).unwrap() {
            Some(r) => {
                let wire = r.wire_frame(&buf);
                if is_test_frame(&wire) {
                    got.push((r, wire));
                } else if wire.windows(WARM.len()).any(|w| w == WARM) && r.stamps.software.is_some()
                {
                    if let Some(tx) = &stamped {
                        let _ = tx.send(());
                    }
                }
            }
            None => break,
        }
    }
    got
}

#[test]
fn frames_cross_a_veth_pair_as_sent_with_their_vlan_tag_and_a_kernel_stamp() {
    if !require_privileges(
        "frames_cross_a_veth_pair_as_sent_with_their_vlan_tag_and_a_kernel_stamp",
    ) {
        return;
    }
    let (a, b) = pair("os");
    let sent = vec![
        frame(0, Some((4 << 13) | 100)),
        frame(1, None),
        frame(2, Some(4094)),
        frame(3, Some((7 << 13) | 1)),
    ];
    let expected = sent.clone();
    let (ready_tx, ready_rx) = mpsc::channel();
    let (stamped_tx, stamped_rx) = mpsc::channel();
    std::thread::scope(|s| {
        let receiver = s.spawn(|| {
            b.run_in(move || {
                let sock = PacketSocket::open("ps1", ETH_P_ALL).unwrap();
                sock.enable_rx_software_stamps().unwrap();
                sock.report_vlan_tags().unwrap();
                ready_tx.send(()).unwrap();
                receive_test_frames_after_warm_up(&sock, 4, Some(stamped_tx))
            })
            .unwrap()
        });
        ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        a.run_in(move || {
            // Ethertype 0: a socket that only sends.
            let sock = PacketSocket::open("ps0", 0).unwrap();
            // The first socket that asks for receive stamps switches the
            // kernel's stamping on through a work item (net_enable_timestamp
            // defers the static key): frames that arrive before it ran have
            // none. Warm-up frames until one arrives stamped (a kernel that
            // never stamps fails here), then every frame must be.
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            loop {
                sock.send(&warm_frame()).unwrap();
                if stamped_rx.recv_timeout(Duration::from_millis(20)).is_ok() {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "no warm-up frame arrived with a kernel receive stamp in 10 s"
                );
            }
            sock.send(&sent[0]).unwrap();
            let rest: Vec<&[u8]> = sent[1..].iter().map(Vec::as_slice).collect();
            assert_eq!(sock.send_batch(&rest).unwrap(), 3);
        })
        .unwrap();
        let got = receiver.join().unwrap();
        assert_eq!(got.len(), expected.len(), "frames lost");
        for ((r, wire), want) in got.iter().zip(&expected) {
            assert_eq!(wire, want, "frame differs from what was sent (VLAN tag?)");
            assert!(!r.outgoing() && !r.truncated(), "{r:?}");
            let t = r.stamps.software.expect("no kernel receive stamp");
            assert!(
                t > 1_600_000_000_000_000_000,
                "stamp is not CLOCK_REALTIME: {t}"
            );
        }
        assert!(got[0].0.vlan.is_some() && got[1].0.vlan.is_none());
        assert!(got
            .windows(2)
            .all(|w| w[0].0.stamps.software <= w[1].0.stamps.software));
    });
}

#[test]
fn a_socket_that_ignores_outgoing_frames_sees_only_what_arrives() {
    if !require_privileges("a_socket_that_ignores_outgoing_frames_sees_only_what_arrives") {
        return;
    }
    let (a, b) = pair("og");
    // Sockets belong to the namespace they were opened in, whichever thread
    // uses them afterwards.
    let (all, incoming, out) = b
        .run_in(|| {
            // Outgoing frames are only handed to ETH_P_ALL sockets.
            let all = PacketSocket::open("ps1", ETH_P_ALL).unwrap();
            let incoming = PacketSocket::open("ps1", ETH_P_ALL).unwrap();
            incoming.ignore_outgoing().unwrap();
            (all, incoming, PacketSocket::open("ps1", 0).unwrap())
        })
        .unwrap();
    out.send(&frame(7, None)).unwrap();
    a.run_in(|| PacketSocket::open("ps0", 0).unwrap().send(&frame(8, None)))
        .unwrap()
        .unwrap();
    let first = |s: &PacketSocket| {
        let (r, wire) = receive_test_frames(s, 1).pop().expect("no test frame");
        (r.outgoing(), wire[14 + MARK.len()])
    };
    let seen = (first(&all), first(&incoming));
    assert_eq!(
        seen.0,
        (true, 7),
        "without the option the outgoing frame comes first"
    );
    assert_eq!(
        seen.1,
        (false, 8),
        "with it only the incoming frame is delivered"
    );
}

fn promiscuity(ns: &Netns, iface: &str) -> u64 {
    let out = ns.ip(&["-d", "-j", "link", "show", "dev", iface]).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v[0]["promiscuity"]
        .as_u64()
        .expect("ip -d -j shows promiscuity")
}

#[test]
fn a_promiscuous_socket_holds_the_interface_promiscuous_while_it_is_open() {
    if !require_privileges("a_promiscuous_socket_holds_the_interface_promiscuous_while_it_is_open")
    {
        return;
    }
    let (_a, b) = pair("pr");
    assert_eq!(promiscuity(&b, "ps1"), 0);
    let sock = b
        .run_in(|| {
            let s = PacketSocket::open("ps1", ETH_P_ALL).unwrap();
            s.set_promiscuous().unwrap();
            s
        })
        .unwrap();
    assert_eq!(promiscuity(&b, "ps1"), 1);
    drop(sock);
    assert_eq!(promiscuity(&b, "ps1"), 0, "closing the socket ends it");
}

#[test]
fn a_wrong_or_down_interface_is_explained_with_the_namespace_it_was_looked_up_in() {
    if !require_privileges(
        "a_wrong_or_down_interface_is_explained_with_the_namespace_it_was_looked_up_in",
    ) {
        return;
    }
    let (_a, b) = pair("wr");
    let ns = b.name().to_string();
    let (missing, here) = b
        .run_in(|| (interface_index("eth9").unwrap_err(), Namespace::current()))
        .unwrap();
    assert_eq!(here, Namespace::Named(ns.clone()));
    assert!(matches!(missing, InterfaceError::NotFound { .. }));
    assert_eq!(
        missing.to_string(),
        format!(
            "no interface `eth9` in network namespace `{ns}` (interfaces there: lo, ps1): \
             check the name with `ip -n {ns} -br link`, or run in the namespace that has it \
             (`ip -all netns exec ip -br link` lists the interfaces of every named namespace)"
        )
    );
    b.ip(&["link", "set", "ps1", "down"]).unwrap();
    let down = b.run_in(|| PacketSocket::open("ps1", ETH_P_ALL)).unwrap();
    let err = down.unwrap_err();
    assert!(matches!(err, SocketError::Down(_)), "{err}");
    assert_eq!(
        err.to_string(),
        "interface ps1 is down: bring it up with `ip link set ps1 up`"
    );
}
