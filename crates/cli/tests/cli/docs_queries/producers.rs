//! A recording of every producer of docs/recording-schema.md, written by
//! the producer's own code: the endpoints' recorders (`sv publish`, `sv
//! subscribe`, `ping`, `reflect`), the joins (`hoptrace join`'s end-to-end join, the
//! chain join, the delivery join), `correlate`'s correlator, the kvm
//! recorders, `goose subscribe`'s recorder, and the tracer's recording functions
//! (`hoptrace_trace::recording`) with its explanation writer, as
//! `trace --explain --record` uses them. Only the inputs are made up (no
//! BPF, no interface): one publisher of 2 streams at 4000/s, 6000 samples
//! each (a wrap of smpCnt), seen by a hypervisor tracer, a subscriber that
//! lost 6 samples per stream, a VMM's vCPU and its interrupt deliveries.
//!
//! Each recording is the folder `ROOT/<name>/rec`, so that the documented
//! snippets, which read `rec/...`, run as written from `ROOT/<name>`.

use std::path::{Path, PathBuf};

use hoptrace_chain::{join_chain, ChainInputs, ClockMap, Side};
use hoptrace_endpoints::e2e_join::join_end_to_end;
use hoptrace_endpoints::ping::{PingReport, PingSample};
use hoptrace_endpoints::publisher::SentSample;
use hoptrace_endpoints::recording::{
    publisher_recorder, subscriber_recorder, write_ping, write_reflect,
};
use hoptrace_endpoints::reflect::{ReflectReport, Reflected};
use hoptrace_endpoints::subscriber::ReceivedSample;
use hoptrace_kvm::delivery_recording::DeliveryRecorder;
use hoptrace_kvm::loader::{DeliveryRecord, ExitRecord};
use hoptrace_kvm::recording::ExitRecorder;
use hoptrace_kvm::ExitReasons;
use hoptrace_probes::catalogue::{profile_hops, Profile};
use hoptrace_probes::event::PacketIdentity;
use hoptrace_record::{
    ClockDomain, ExplainedStage, ExplanationWriter, LaneSpan, PacketStatus, RecordingWriter,
    RotatePolicy, StagePart, StampSource,
};
use hoptrace_sv::{SampleKind, StreamCounters};
use hoptrace_trace::recording::{append_row, copy_hop, recording_meta, RecordingContext};
use hoptrace_trace::timeline::HopWho;
use hoptrace_trace::Timeline;

use crate::endpoints_common::frames::libiec61850_like_frame;

const RATE: u64 = 4000;
const STREAMS: u64 = 2;
/// Samples per stream: one wrap of smpCnt and a half.
const SAMPLES: u64 = 6000;
/// Host REALTIME of the first sample: this run's second (the kvm
/// recordings' CLOCK_MONOTONIC stamps, mapped from the tracer's TAI ones,
/// stay positive).
fn base() -> i64 {
    static BASE: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *BASE.get_or_init(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        now.as_secs() as i64 * 1_000_000_000
    })
}
/// The host's TAI − UTC offset, seconds.
const HOST_TAI_S: i64 = 37;
/// The VMM thread that copies frames out of the tap, and the vCPU thread.
const VMM_TID: u32 = 4242;
const VCPU_TID: u32 = 4343;

/// One producer's recording and how many rows it must read as.
#[derive(Debug, Clone)]
pub struct Made {
    pub producer: &'static str,
    /// The folder holding `rec` (the snippets run from here).
    pub home: PathBuf,
    pub rows: u64,
}

impl Made {
    pub fn rec(&self) -> PathBuf {
        self.home.join("rec")
    }
}

/// What the tracer explained.
#[derive(Debug, Clone, Copy)]
pub struct Explained {
    pub stages: u64,
    pub parts: u64,
    pub total_ns: i64,
}

/// Every producer's recording under one root.
pub struct Recordings {
    pub made: Vec<Made>,
    pub explained: Explained,
}

impl Recordings {
    pub fn of(&self, producer: &str) -> &Made {
        self.made
            .iter()
            .find(|m| m.producer == producer)
            .unwrap_or_else(|| panic!("no {producer} recording"))
    }
}

fn stream(s: u64) -> String {
    format!("MU{s:02}")
}

fn mac(s: u64) -> [u8; 6] {
    [0x01, 0x0c, 0xcd, 0x04, 0x00, s as u8]
}

/// Host REALTIME when sample `n` of stream `s` was sent.
fn sent_at(s: u64, n: u64) -> i64 {
    base() + n as i64 * 250_000 + s as i64 * 10_000
}

/// Samples lost before the subscriber (6 per stream).
fn lost(n: u64) -> bool {
    n % 1000 == 7
}

/// The parts of an explained stage: (kind, name, ns).
type Parts = &'static [(&'static str, &'static str, i64)];

/// Samples whose `fwd -> consumer_copy` stage the tracer explained, with
/// their parts: (stream 0 sample, parts).
const LATE: [(u64, Parts); 3] = [
    (
        100,
        &[
            ("task", "stress/777 (FIFO 50)", 600_000),
            ("softirq", "NET_RX", 90_000),
        ],
    ),
    (2500, &[("steal", "steal", 700_000)]),
    (
        4100,
        &[
            ("task", "stress/777 (FIFO 50)", 500_000),
            ("hardirq", "virtio0-input (irq 24)", 150_000),
            ("unattributed", "flight recorder overwritten", 50_000),
        ],
    ),
];

fn home(root: &Path, name: &str) -> PathBuf {
    let h = root.join(name);
    std::fs::create_dir_all(&h).unwrap();
    h
}

/// Write every producer's recording under `root`.
pub fn write_all(root: &Path) -> Recordings {
    let cmd = |c: &str| c.split(' ').map(String::from).collect::<Vec<_>>();
    let mut made = Vec::new();
    let mut add = |producer, home: PathBuf, rows| {
        made.push(Made {
            producer,
            home,
            rows,
        })
    };
    let pub_home = home(root, "pub");
    add(
        "sv-publish",
        pub_home.clone(),
        publisher(&pub_home.join("rec")),
    );
    let sub_home = home(root, "sub");
    add(
        "sv-subscribe",
        sub_home.clone(),
        subscriber(&sub_home.join("rec")),
    );
    let e2e = home(root, "e2e");
    let c = join_end_to_end(
        &pub_home.join("rec"),
        &sub_home.join("rec"),
        &e2e.join("rec"),
        None,
    )
    .unwrap();
    assert_eq!(c.matched, c.sub_rows);
    add("lab-join", e2e, c.sub_rows);
    let trace = home(root, "trace");
    let (rows, explained) = tracer(&trace.join("rec"));
    add("trace", trace.clone(), rows);
    let chain = home(root, "chain");
    let inputs = ChainInputs {
        publisher: pub_home.join("rec"),
        host_trace: Some(trace.join("rec")),
        guest_trace: None,
        subscriber: sub_home.join("rec"),
        subscriber_side: Side::Host,
    };
    let map = ClockMap::new(None, Some(HOST_TAI_S));
    let c = join_chain(&inputs, &map, &chain.join("rec")).unwrap();
    add("chain", chain, c.published);
    let corr = home(root, "correlate");
    add("correlate", corr.clone(), correlate(&corr.join("rec")));
    let ping = home(root, "ping");
    add("ping", ping.clone(), pinged(&ping.join("rec")));
    let reflect = home(root, "reflect");
    add("reflect", reflect.clone(), reflected(&reflect.join("rec")));
    let kvm = home(root, "kvm");
    let copies: Vec<i64> = (0..100)
        .map(|n| timeline(0, n).hops[3].unwrap() as i64)
        .collect();
    let (exits, events) =
        kvm_recordings(&kvm.join("rec"), &cmd("hoptrace kvm --delivery"), &copies);
    add("kvm", kvm.clone(), exits);
    // `K/delivery`, linked as `rec` for the snippets.
    let kvm_delivery = home(root, "kvm-delivery");
    std::os::unix::fs::symlink(kvm.join("rec/delivery"), kvm_delivery.join("rec")).unwrap();
    add("kvm-delivery", kvm_delivery, events);
    // `K/nested`, linked as `rec` for the snippets.
    let kvm_nested = home(root, "kvm-nested");
    let nested = nested_recording(&kvm.join("rec"), &cmd("hoptrace kvm --nested"));
    std::os::unix::fs::symlink(kvm.join("rec/nested"), kvm_nested.join("rec")).unwrap();
    add("kvm-nested", kvm_nested, nested);
    let delivery = home(root, "delivery");
    let (ds, _) = hoptrace_kvm::delivery_join::run(
        &trace.join("rec"),
        &kvm.join("rec"),
        &delivery.join("rec"),
        1_000_000,
        &cmd("hoptrace kvm delivery"),
    )
    .unwrap();
    add("delivery", delivery, ds.len() as u64);
    let goose = home(root, "goose");
    add(
        "goose-subscribe",
        goose.clone(),
        goose_subscriber(&goose.join("rec")),
    );
    Recordings { made, explained }
}

/// `goose subscribe --record`: two control blocks, 40 messages each (a
/// state change every 10), judged by the subscriber's tracker, received
/// 300 us after their T plus 2 ms per retransmission.
fn goose_subscriber(dir: &Path) -> u64 {
    use hoptrace_endpoints::goose::Heard;
    use hoptrace_sv::goose::tracker::GooseTracker;
    let mut rec =
        hoptrace_endpoints::goose_recording::goose_recorder(Some(dir), "veth1", None, false)
            .unwrap();
    let mut rows = 0;
    for b in 0..2u32 {
        let mut tracker = GooseTracker::new();
        for n in 0..40u32 {
            let (st, sq) = (1 + n / 10, n % 10);
            let t = base() + i64::from(st) * 100_000_000;
            let rx = t + 300_000 + i64::from(sq) * 2_000_000;
            let mut frame = crate::goose_record::frame(st, sq, 8, t);
            frame.pdu.gocb_ref = format!("IED{b}/LLN0$GO$trip");
            let observation = tracker.observe(st, sq, 8, rx as u64);
            rec.push(&Heard {
                frame,
                observation,
                rx_ns: rx,
                kernel_rx_ns: Some(rx),
                app_ns: rx + 12_000,
            });
            rows += 1;
        }
    }
    rec.finish().unwrap();
    rows
}

/// Sample `n` of stream `s`: its identity in a recording.
fn key(s: u64, n: u64) -> hoptrace_endpoints::sample_key::SampleKey {
    hoptrace_endpoints::sample_key::SampleKey {
        stream: stream(s),
        dst_mac: mac(s),
        app_id: 0x4000 + s as u16,
        smp_cnt: (n % RATE) as u16,
        epoch: (n / RATE) as u32,
        seq: n,
    }
}

fn publisher(dir: &Path) -> u64 {
    let mut rec = publisher_recorder(
        Some(dir),
        Some(RATE as u32),
        StampSource::Software,
        &serde_json::Value::Null,
    )
    .unwrap();
    for n in 0..SAMPLES {
        for s in 0..STREAMS {
            let t = sent_at(s, n);
            rec.push(&SentSample {
                key: key(s, n),
                t_sched: t - 5_000,
                t_app: t - 2_000,
                t_tx: Some(t),
                cpu: None,
                refused: None,
            });
        }
    }
    rec.finish().unwrap();
    SAMPLES * STREAMS
}

fn subscriber(dir: &Path) -> u64 {
    let mut rec = subscriber_recorder(
        Some(dir),
        "veth1",
        StampSource::Software,
        RATE as u32,
        None,
        false,
    )
    .unwrap();
    let mut rows = 0;
    for n in (0..SAMPLES).filter(|&n| !lost(n)) {
        for s in 0..STREAMS {
            let t_rx = sent_at(s, n) + 80_000 + (n % 50) as i64 * 1_000;
            rec.push(&ReceivedSample {
                key: key(s, n),
                kind: SampleKind::InOrder { gap: 0 },
                t_rx: Some(t_rx),
                t_app: t_rx + 20_000,
                cpu: None,
                refr_tm: None,
                malformed: false,
                counters: StreamCounters::default(),
            });
            rows += 1;
        }
    }
    rec.finish().unwrap();
    rows
}

/// The hypervisor tracer's timeline of sample `n` of stream `s`, its hops
/// in host TAI: rx, fwd, tap_xmit, consumer_copy (held 700 us for the late
/// samples), and egress for one sample in four.
fn timeline(s: u64, n: u64) -> Timeline {
    let rx = (sent_at(s, n) + HOST_TAI_S * 1_000_000_000 + 40_000) as u64;
    let late = s == 0 && LATE.iter().any(|l| l.0 == n);
    let copy = rx + 30_000 + if late { 700_000 } else { 0 };
    let hops = vec![
        Some(rx),
        Some(rx + 10_000),
        Some(rx + 15_000),
        Some(copy),
        n.is_multiple_of(4).then_some(rx + 35_000),
    ];
    let who = |tid| Some(HopWho { cpu: 1, tid });
    Timeline {
        identity: PacketIdentity::Sv {
            dst_mac: mac(s),
            app_id: 0x4000 + s as u16,
            sv_id: stream(s).into_bytes().into(),
            smp_cnt: (n % RATE) as u16,
        },
        stream: stream(s).into(),
        dest: Some("tap0".into()),
        hops: hops.into(),
        status: PacketStatus::Ok,
        drop_reason: None,
        drop_hop: None,
        epoch: (n / RATE) as u32,
        seq: n,
        last_cpu: 1,
        last_comm: "qemu-system-x86".into(),
        who: vec![who(0), who(0), who(VMM_TID), who(VMM_TID), who(0)].into(),
    }
}

fn explanation(t: &Timeline, parts: &[(&str, &str, i64)]) -> ExplainedStage {
    let (start, end) = (t.hops[1].unwrap() as i64, t.hops[3].unwrap() as i64);
    ExplainedStage {
        packet: hoptrace_record::PacketKey {
            stream: t.stream.to_string(),
            app_id: Some(0x4000),
            smp_cnt: Some((t.seq % RATE) as u16),
            epoch: Some(t.epoch),
            seq: t.seq,
            dest: t.dest.as_deref().map(str::to_string),
        },
        stage: "fwd..consumer_copy".into(),
        start_ns: start,
        end_ns: end,
        cpu: 1,
        task: format!("qemu-system-x86/{VMM_TID}"),
        sleeping_ns: 5_000,
        runnable_ns: end - start - 10_000,
        running_ns: 5_000,
        parts: parts
            .iter()
            .map(|&(kind, name, ns)| StagePart {
                kind: kind.into(),
                name: name.into(),
                ns,
            })
            .collect(),
        lane: vec![LaneSpan {
            cpu: Some(1),
            start_ns: start,
            end_ns: end,
            kind: parts[0].0.into(),
            name: parts[0].1.into(),
        }],
    }
}

/// `trace --profile hypervisor --explain --record`: two segments (the
/// tracer rotates every 5 s) and the explanations flushed twice (the
/// tracer flushes every second).
fn tracer(dir: &Path) -> (u64, Explained) {
    let hops = profile_hops(Profile::Hypervisor);
    let meta = recording_meta(&RecordingContext {
        hops: &hops,
        profile: Profile::Hypervisor,
        clock: ClockDomain::Tai,
        rate: RATE as u32,
        command_line: "hoptrace trace --explain 500us --record rec"
            .split(' ')
            .map(String::from)
            .collect(),
        doctor: None,
        vm: None,
    });
    let mut w = RecordingWriter::create(dir, meta, RotatePolicy::default()).unwrap();
    let mut x = ExplanationWriter::new(dir);
    let copy = copy_hop(&hops);
    let mut explained = Explained {
        stages: 0,
        parts: 0,
        total_ns: 0,
    };
    for n in 0..SAMPLES {
        for s in 0..STREAMS {
            let t = timeline(s, n);
            append_row(&mut w, &t, copy).unwrap();
            if let Some((_, parts)) = LATE.iter().find(|l| s == 0 && l.0 == n) {
                x.push(explanation(&t, parts));
                explained.stages += 1;
                explained.parts += parts.len() as u64;
                explained.total_ns += parts.iter().map(|p| p.2).sum::<i64>();
            }
        }
        if n == SAMPLES / 2 {
            x.flush().unwrap();
            w.rotate().unwrap();
        }
    }
    x.flush().unwrap();
    let rows = w.close().unwrap().rows;
    assert_eq!(rows, SAMPLES * STREAMS);
    (rows, explained)
}

/// Two capture points of one stream, 1500 frames of 2 ASDUs 500 us apart,
/// the second point 50-56 us later.
fn correlate(dir: &Path) -> u64 {
    use hoptrace_analysis::correlate::Correlator;
    let mut c = Correlator::new(&["a".into(), "b".into()], RATE as u32);
    let frames: Vec<Vec<u8>> = (0..1500u16)
        .map(|k| libiec61850_like_frame("MU_CAP", 2 * k, 0x4001))
        .collect();
    for (cap, delay) in [(0, 0), (1, 50_000)] {
        for (k, f) in frames.iter().enumerate() {
            let t = base() + k as i64 * 500_000 + delay + cap as i64 * (k % 7) as i64 * 1_000;
            c.add_frame(cap, t, f).unwrap();
        }
    }
    let rows = c
        .finish()
        .write_recording(dir, vec!["hoptrace".into(), "correlate".into()])
        .unwrap();
    assert_eq!(rows, 3000);
    rows
}

/// `ping --record`: 500 requests, one reply missing.
fn pinged(dir: &Path) -> u64 {
    let samples: Vec<PingSample> = (0..500u64)
        .map(|i| {
            let t = base() + i as i64 * 1_000_000;
            PingSample {
                seq: i,
                t_tx: Some(t),
                t_app_tx: t - 3_000,
                t_rx: (i != 250).then_some(t + 120_000 + i as i64),
                replies: u32::from(i != 250),
            }
        })
        .collect();
    let report = PingReport {
        samples,
        sent: 500,
        received: 499,
        lost: 1,
        duplicated: 0,
        reordered: 0,
        rtt: hdrhistogram::Histogram::new(3).unwrap(),
        stamp_source: StampSource::Software,
        tx_stamps: 500,
        over_max: 0,
        first_over: None,
        marker_error: None,
        markers: 0,
        broke: false,
        path: "AF_PACKET".into(),
        link_downs: Default::default(),
    };
    write_ping(dir, "veth0", &report).unwrap();
    500
}

/// `reflect --record`: the replies to `pinged`'s requests (all but 250's),
/// 40 us after their request, answered 30 us later (none held).
fn reflected(dir: &Path) -> u64 {
    let replies: Vec<Reflected> = (0..500u64)
        .filter(|&i| i != 250)
        .map(|i| {
            let t = base() + i as i64 * 1_000_000 + 40_000;
            Reflected {
                seq: i,
                t_rx: Some(t),
                t_tx: Some(t + 30_000),
                held_ns: 0,
                t_app_tx: t + 25_000,
            }
        })
        .collect();
    let report = ReflectReport {
        sent: replies.len() as u64,
        tx_stamps: replies.len() as u64,
        stamp_source: StampSource::Software,
        replies,
        link_downs: Default::default(),
    };
    write_reflect(dir, "veth1", &report).unwrap();
    report.sent
}

/// `kvm --nested --record K`: `K/nested`, as a guest hypervisor's vCPU
/// makes them: 50 nested `cpuid` exits, each resumed after `stgi`, `clgi`,
/// `vmrun` (a cycle of 400 us: 40 nested guest, 240 this host, 120 guest
/// hypervisor), a second before the delivery rows. Returns the rows.
fn nested_recording(kvm_dir: &Path, cmd: &[String]) -> u64 {
    use hoptrace_kvm::nested::{NestedExit, Parts};
    let exit = include_bytes!("../../../../exit-reasons/tests/fixtures/kvm_exit-6.1-debian.format");
    let inject = include_bytes!(
        "../../../../exit-reasons/tests/fixtures/kvm_nested_vmexit_inject-6.1-debian.format"
    );
    let cat = hoptrace_kvm::stats::Catalogue {
        exit: ExitReasons::from_format_bytes(exit, "exit_reason").unwrap(),
        nested: [
            None,
            Some(ExitReasons::from_format_bytes(inject, "exit_code").unwrap()),
        ],
    };
    let mut w = hoptrace_kvm::nested_recording::NestedRecorder::create(kvm_dir, cmd).unwrap();
    let start = 5_000_000_000u64;
    for i in 0..50u64 {
        let resumed = start + i * 400_000;
        let e = NestedExit {
            tgid: 4300,
            tid: 4301,
            vcpu: 0,
            isa: 2,
            reason: 0x72,
            l3_exit: Some(0x72),
            resumed_ns: Some(resumed),
            exit_ns: resumed + 100_000,
            vmenter_ns: resumed + 400_000,
            cycle: Parts {
                nested_guest: 40_000,
                host: 240_000,
                guest_hypervisor: 120_000,
            },
            handling: Parts {
                nested_guest: 0,
                host: 180_000,
                guest_hypervisor: 120_000,
            },
            gh_exits: vec![0x84, 0x85, 0x80],
            host_only_l3_exits: 0,
        };
        w.append(&e, &cat).unwrap();
    }
    w.close().unwrap().1
}

/// `kvm --delivery --record K` while the VMM delivered `copies` (the
/// tracer's consumer_copy times, TAI) into the guest: per copy, MSI,
/// accept and wake-up of the vCPU thread by the VMM's thread, the vector
/// injected and the vCPU's entry (hlt exits, in `K/delivery` and `K`,
/// CLOCK_MONOTONIC as the BPF programs stamp); and 700 io exits a second
/// before. Returns the exits and the delivery events written.
fn kvm_recordings(dir: &Path, cmd: &[String], copies: &[i64]) -> (u64, u64) {
    let format =
        include_bytes!("../../../../exit-reasons/tests/fixtures/kvm_exit-6.1-debian.format");
    let reasons = ExitReasons::from_format_bytes(format, "exit_reason").unwrap();
    let mut exits = ExitRecorder::create(dir, &reasons, cmd).unwrap();
    let mut events = DeliveryRecorder::create(dir, cmd).unwrap();
    // What the recorder stored as CLOCK_TAI − CLOCK_MONOTONIC (read again:
    // the two differ by the clocks' slew over microseconds).
    let offset = hoptrace_kvm::delivery_recording::tai_minus_monotonic();
    let exit = |exit_ns: i64, entry_ns: i64, reason| ExitRecord {
        exit_ns: exit_ns as u64,
        entry_ns: entry_ns as u64,
        reason,
        tgid: 4200,
        tid: VCPU_TID,
        vcpu_id: 0,
        isa: 2,
        exit_cpu: 1,
        entry_cpu: 1,
    };
    let event = |ns: i64, kind, tid, arg0, arg1| DeliveryRecord {
        ns: ns as u64,
        arg0,
        arg1,
        kind,
        tgid: 4200,
        tid,
        cpu: 1,
    };
    let first = copies[0] - offset;
    for i in 0..700 {
        let t = first - 1_000_000_000 + i * 100_000;
        exits.append(&exit(t, t + 2_000, 0x7b), &reasons).unwrap();
    }
    for (i, &c) in copies.iter().enumerate() {
        let m = c - offset;
        let vector = 0x22;
        for e in [
            event(m + 2_000, 0, VMM_TID, 0xfee0_0000, vector),
            event(m + 3_000, 2, VMM_TID, 0, vector),
            event(m + 4_000, 3, VMM_TID, u64::from(VCPU_TID), 4200),
            event(m + 6_000, 5, VCPU_TID, vector, 0),
        ] {
            events.append(&e).unwrap();
        }
        let entry = m + 8_000 + (i % 5) as i64 * 100;
        exits
            .append(&exit(m + 5_000, entry, 0x78), &reasons)
            .unwrap();
    }
    let (_, n_exits) = exits.close().unwrap();
    let (_, n_events) = events.close().unwrap();
    (n_exits, n_events)
}
