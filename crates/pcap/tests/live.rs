//! Live AF_PACKET capture across a veth pair in two lab namespaces: every
//! frame arrives, with its VLAN tag restored and a kernel RX timestamp.

use std::mem::{size_of, zeroed};
use std::sync::mpsc;
use std::time::Duration;

use hoptrace_netns::{require_privileges, unique_name, veth_pair, Netns};
use hoptrace_pcap::LiveCapture;
use hoptrace_sv::generate::StreamPlan;
use hoptrace_sv::{decode, VlanTag};

fn send_raw(iface: &str, frames: &[Vec<u8>]) -> std::io::Result<()> {
    let name = std::ffi::CString::new(iface).unwrap();
    // SAFETY: plain libc socket calls with valid buffers.
    unsafe {
        let idx = libc::if_nametoindex(name.as_ptr());
        let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0);
        if fd < 0 || idx == 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut sll: libc::sockaddr_ll = zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = idx as i32;
        sll.sll_halen = 6;
        for f in frames {
            let n = libc::sendto(
                fd,
                f.as_ptr() as *const libc::c_void,
                f.len(),
                0,
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                size_of::<libc::sockaddr_ll>() as u32,
            );
            if n < 0 {
                let e = std::io::Error::last_os_error();
                libc::close(fd);
                return Err(e);
            }
        }
        libc::close(fd);
    }
    Ok(())
}

#[test]
fn live_capture_receives_sv_with_vlan_and_timestamps() {
    if !require_privileges("live_capture_receives_sv_with_vlan_and_timestamps") {
        return;
    }
    let a = Netns::create(&unique_name("lca")).unwrap();
    let b = Netns::create(&unique_name("lcb")).unwrap();
    veth_pair(&a, "lc0", &b, "lc1", None, None).unwrap();
    let plan = StreamPlan {
        streams: 2,
        samples: 50,
        vlan: Some(VlanTag::dot1q(100, 4)),
        ..Default::default()
    };
    let mut frames: Vec<Vec<u8>> = plan.frames().unwrap().map(|f| f.bytes).collect();
    // One untagged frame too.
    let mut untagged = decode(&frames[0]).unwrap().to_owned_frame();
    untagged.vlans.clear();
    frames.push(hoptrace_sv::encode(&untagged).unwrap());
    let expected = frames.clone();

    let (ready_tx, ready_rx) = mpsc::channel();
    std::thread::scope(|s| {
        let cap = s.spawn(|| {
            b.run_in(move || {
                let mut c = LiveCapture::open("lc1").expect("open capture");
                ready_tx.send(()).unwrap();
                let mut got = vec![];
                while got.len() < 101 {
                    match c.next_packet(Some(Duration::from_secs(5))).unwrap() {
                        Some(p) => {
                            if p.data.len() > 14 && decode(&p.data).is_ok() {
                                got.push(p)
                            }
                        }
                        None => break,
                    }
                }
                got
            })
            .unwrap()
        });
        ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        a.run_in(move || send_raw("lc0", &frames)).unwrap().unwrap();
        let got = cap.join().unwrap();
        assert_eq!(got.len(), expected.len());
        for (g, e) in got.iter().zip(&expected) {
            assert_eq!(&g.data, e, "frame differs (VLAN tag not restored?)");
            assert!(g.time_ns > 1_600_000_000_000_000_000, "no kernel timestamp");
            assert!(!g.outgoing);
        }
        assert!(got.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
    });
}
