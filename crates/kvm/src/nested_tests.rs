//! The grouping on recorded event sequences: tracefs traces of L1 in the
//! nested lab (`hoptrace kvm guest-hypervisor --cpuid 2 --hlt 1 --io 2`,
//! kvm_amd vgif=0 and vgif=1, tests/fixtures/nested-gh-vgif*-6.1.trace),
//! turned into the records the BPF program sends, in its ring order.

use super::*;
use crate::reasons::{ExitReasons, Isa};
use crate::stats::Catalogue;

fn catalogue() -> Catalogue {
    let exit = include_bytes!("../../exit-reasons/tests/fixtures/kvm_exit-6.1-debian.format");
    let inject = include_bytes!(
        "../../exit-reasons/tests/fixtures/kvm_nested_vmexit_inject-6.1-debian.format"
    );
    Catalogue {
        exit: ExitReasons::from_format_bytes(exit, "exit_reason").unwrap(),
        nested: [
            None,
            Some(ExitReasons::from_format_bytes(inject, "exit_code").unwrap()),
        ],
    }
}

/// A ring record: what the BPF program sends.
#[derive(Debug, Clone, Copy)]
enum Rec {
    Exit(ExitRecord),
    Nested(NestedRecord),
}

/// The records of a tracefs trace (`comm-tid [cpu] flags secs: event: ...`),
/// in the order the BPF program sends them: nested events when they fire,
/// an exit at its entry.
fn records(trace: &str, reasons: &ExitReasons) -> Vec<Rec> {
    let code = |name: &str| reasons.code_of(Isa::Svm, name).expect(name);
    let mut pending: HashMap<u32, ExitRecord> = HashMap::new();
    let mut out = Vec::new();
    for line in trace.lines().filter(|l| !l.trim_start().starts_with('#')) {
        let (head, rest) = line.split_once(": ").unwrap();
        let mut h = head.split_whitespace();
        let tid: u32 = h
            .next()
            .unwrap()
            .rsplit('-')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let secs: f64 = h.last().unwrap().parse().unwrap();
        let ns = (secs * 1e9).round() as u64;
        let (event, args) = rest.split_once(": ").unwrap();
        let word = |key: &str| {
            let mut it = args.split_whitespace();
            it.find(|w| w.trim_end_matches(':') == key);
            it.next().unwrap().to_string()
        };
        let nested = |event: u32, value: u64| {
            Rec::Nested(NestedRecord {
                ns,
                value,
                tgid: tid,
                tid,
                event,
                isa: if event <= EV_INJECT { 2 } else { 0 },
            })
        };
        match event {
            "kvm_exit" => {
                let r = ExitRecord {
                    exit_ns: ns,
                    entry_ns: 0,
                    reason: code(&word("reason")),
                    tgid: tid,
                    tid,
                    vcpu_id: 0,
                    isa: 2,
                    exit_cpu: 0,
                    entry_cpu: 0,
                };
                pending.insert(tid, r);
            }
            "kvm_entry" => {
                if let Some(mut r) = pending.remove(&tid) {
                    r.entry_ns = ns;
                    out.push(Rec::Exit(r));
                }
            }
            "kvm_nested_vmexit" => out.push(nested(EV_VMEXIT, code(&word("reason")))),
            "kvm_nested_vmexit_inject" => out.push(nested(EV_INJECT, code(&word("reason")))),
            "kvm_nested_vmenter" => {
                let rip = u64::from_str_radix(word("nested_rip").trim_start_matches("0x"), 16);
                out.push(nested(EV_VMENTER, rip.unwrap()))
            }
            "kvm_nested_intr_vmexit" => out.push(nested(EV_INTR_VMEXIT, 0)),
            other => panic!("unexpected event {other}"),
        }
    }
    out
}

/// Feed the records; return the levels of the exits, the tracker and its
/// resumed nested exits.
fn run(recs: &[Rec]) -> (Vec<Level>, NestedTracker, Vec<NestedExit>) {
    let mut t = NestedTracker::default();
    let mut levels = Vec::new();
    let mut done = Vec::new();
    for r in recs {
        match r {
            Rec::Exit(e) => {
                levels.push(t.exit(e));
                done.extend(t.take_done());
            }
            Rec::Nested(n) => t.event(n),
        }
    }
    (levels, t, done)
}

const VGIF0: &str = include_str!("../tests/fixtures/nested-gh-vgif0-6.1.trace");
const VGIF1: &str = include_str!("../tests/fixtures/nested-gh-vgif1-6.1.trace");

fn names(cat: &Catalogue, codes: &[u64]) -> Vec<String> {
    codes.iter().map(|c| cat.exit.name(Isa::Svm, *c)).collect()
}

#[test]
fn one_reflected_cpuid_without_virtual_gif_costs_the_guest_hypervisor_stgi_clgi_and_vmrun() {
    // The docs' trace of one L3 cpuid (kvm_amd vgif=0), in tracefs order.
    let trace = "\
 hoptrace-151 [000] d..1. 4.513246: kvm_entry: vcpu 0, rip 0x2006
 hoptrace-151 [000] ..... 4.513279: kvm_exit: vcpu 0 reason cpuid rip 0x2004 info1 0x0
 hoptrace-151 [000] ..... 4.513283: kvm_nested_vmexit: vcpu 0 reason cpuid rip 0x2004 info1 0x0
 hoptrace-151 [000] ..... 4.513299: kvm_nested_vmexit_inject: reason: cpuid ext_inf1: 0x0
 hoptrace-151 [000] d..1. 4.513311: kvm_entry: vcpu 0, rip 0x102d
 hoptrace-151 [000] ..... 4.513341: kvm_exit: vcpu 0 reason stgi rip 0x102d info1 0x0
 hoptrace-151 [000] d..1. 4.513364: kvm_entry: vcpu 0, rip 0x1030
 hoptrace-151 [000] ..... 4.513392: kvm_exit: vcpu 0 reason clgi rip 0x1027 info1 0x0
 hoptrace-151 [000] d..1. 4.513407: kvm_entry: vcpu 0, rip 0x102a
 hoptrace-151 [000] ..... 4.513431: kvm_exit: vcpu 0 reason vmrun rip 0x102a info1 0x0
 hoptrace-151 [000] ..... 4.513450: kvm_nested_vmenter: rip: 0x102d vmcb: 0x3000 nested_rip: 0x0000000000002006 int_ctl: 0x0
 hoptrace-151 [000] d..1. 4.513463: kvm_entry: vcpu 0, rip 0x2006
";
    let cat = catalogue();
    let (levels, t, done) = run(&records(trace, &cat.exit));
    assert_eq!(
        levels,
        [Level::NestedGuest, Level::Guest, Level::Guest, Level::Guest]
    );
    assert_eq!(done.len(), 1);
    let e = &done[0];
    assert_eq!(cat.exit.name(Isa::Svm, e.reason), "cpuid");
    assert_eq!(names(&cat, &e.gh_exits), ["stgi", "clgi", "vmrun"]);
    assert_eq!(e.l3_exit, cat.exit.code_of(Isa::Svm, "cpuid"));
    // No vmenter before it in this trace: the cycle is not timed; the
    // handling runs from the L3 kvm_exit (4.513279) to the vmenter (4.513450).
    assert_eq!(e.resumed_ns, None);
    assert_eq!(e.handling_ns(), 171_000);
    // This host: 4.513279..4.513311, ..341..364, ..392..407, ..431..450.
    assert_eq!(e.handling.host, 32_000 + 23_000 + 15_000 + 19_000);
    // The guest hypervisor: 311..341, 364..392, 407..431.
    assert_eq!(e.handling.guest_hypervisor, 30_000 + 28_000 + 24_000);
    assert_eq!(e.handling.sum(), e.handling_ns());
    assert_eq!(t.counts[&151].vmenters, 1);
    assert_eq!(t.open().len(), 0);
}

/// The whole run of one fixture: (levels, tracker, nested exits).
fn fixture(trace: &str) -> (Catalogue, Vec<Level>, NestedTracker, Vec<NestedExit>) {
    let cat = catalogue();
    let (levels, t, done) = run(&records(trace, &cat.exit));
    (cat, levels, t, done)
}

/// Checks common to both recorded runs (L3: 2 cpuid, 1 hlt, 3 out, the last
/// of which ends the run; L2: 3 MSR accesses, 6 VMRUNs, a final out).
fn common(trace: &str, designed: &[&str]) {
    let (cat, levels, t, done) = fixture(trace);
    let code = |n: &str| cat.exit.code_of(Isa::Svm, n).unwrap();
    // Resumed: all but the last out; per reason in order.
    let reasons: Vec<String> = done
        .iter()
        .map(|e| cat.exit.name(Isa::Svm, e.reason))
        .collect();
    assert_eq!(reasons, ["cpuid", "cpuid", "hlt", "io", "io"]);
    let injected: u64 = t.injected.values().sum();
    assert_eq!(injected, 6);
    assert_eq!(
        t.open().into_values().sum::<u64>(),
        1,
        "the done port's out"
    );
    let th = &t.counts[&done[0].tid];
    assert_eq!(th.vmenters, 6);
    assert_eq!(th.vmenter_without_nested_exit, 1, "L2's first VMRUN");
    assert_eq!(th.nested_exit_unresumed + th.events_outside_exits, 0);
    // L3's exits: 6 reflected and its first touch of its code page (npf).
    assert_eq!(th.l3_exits, 7);
    assert_eq!(
        levels.iter().filter(|l| **l == Level::NestedGuest).count(),
        7
    );
    assert_eq!(
        done[0].host_only_l3_exits, 1,
        "L3's npf, handled by L1 alone"
    );
    for e in &done {
        // The designed instructions, in order, after L2's page faults.
        let own: Vec<String> = names(&cat, &e.gh_exits)
            .into_iter()
            .filter(|n| n != "npf")
            .collect();
        assert_eq!(own, designed, "{e:?}");
        assert_eq!(*e.gh_exits.last().unwrap(), code("vmrun"));
        assert_eq!(e.l3_exit, Some(e.reason));
        // Every cycle has a vmenter before it; the parts add up.
        let wall = e.wall_ns().unwrap();
        assert_eq!(e.cycle.sum(), wall, "{e:?}");
        assert_eq!(e.handling.sum(), e.handling_ns(), "{e:?}");
        assert_eq!(e.handling.nested_guest, 0);
        assert!(
            e.cycle.nested_guest > 0 && e.cycle.guest_hypervisor > 0,
            "{e:?}"
        );
        assert!(e.handling_ns() < wall);
    }
    // Aggregated: the same sums, per reason.
    let mut stats = crate::nested_report::NestedStats::default();
    done.iter().for_each(|e| stats.add(e));
    let v = stats.view(&cat, &t);
    assert_eq!((v.nested_exits, v.resumed, v.open_at_end), (6, 5, 1));
    assert_eq!(v.parts_mismatch, 0);
    assert_eq!(
        v.wall_ns,
        v.nested_guest_ns + v.host_ns + v.guest_hypervisor_ns
    );
    let io = v.reasons.iter().find(|r| r.reason == "io").unwrap();
    assert_eq!((io.nested_exits, io.resumed, io.open_at_end), (3, 2, 1));
    assert_eq!(io.factor_min, designed.len() as u64);
}

#[test]
fn a_recorded_run_with_virtual_gif_costs_one_guest_hypervisor_exit_per_nested_exit() {
    common(VGIF1, &["vmrun"]);
}

#[test]
fn a_recorded_run_without_virtual_gif_costs_three_guest_hypervisor_exits_per_nested_exit() {
    common(VGIF0, &["stgi", "clgi", "vmrun"]);
    // The first cpuid's handling also had L2's first touch of the VMCB page.
    let (cat, _, _, done) = fixture(VGIF0);
    assert_eq!(
        names(&cat, &done[0].gh_exits),
        ["stgi", "npf", "clgi", "vmrun"]
    );
}

#[test]
fn nested_events_stamped_outside_their_exit_are_counted_and_not_used() {
    let cat = catalogue();
    let mut recs = records(
        "\
 h-7 [000] ..... 1.000010: kvm_nested_vmenter: rip: 0x1 vmcb: 0x2 nested_rip: 0x2000 int_ctl: 0x0
 h-7 [000] ..... 1.000020: kvm_exit: vcpu 0 reason vmrun rip 0x102a
 h-7 [000] d..1. 1.000030: kvm_entry: vcpu 0, rip 0x2000
",
        &cat.exit,
    );
    // The vmenter came before the first exit seen (tracing started inside
    // an exit): it is not this exit's.
    assert!(matches!(recs[0], Rec::Nested(_)));
    let (levels, t, done) = run(&recs);
    assert_eq!(levels, [Level::Guest]);
    assert!(done.is_empty());
    assert_eq!(t.counts[&7].events_outside_exits, 1);
    assert_eq!(t.counts[&7].vmenters, 0);
    // An inject while one is open (its vmenter lost) is counted.
    recs = records(
        "\
 h-7 [000] ..... 1.000020: kvm_exit: vcpu 0 reason cpuid rip 0x2004
 h-7 [000] ..... 1.000021: kvm_nested_vmexit: vcpu 0 reason cpuid rip 0x2004
 h-7 [000] ..... 1.000022: kvm_nested_vmexit_inject: reason: cpuid ext_inf1: 0x0
 h-7 [000] d..1. 1.000030: kvm_entry: vcpu 0, rip 0x102d
 h-7 [000] ..... 1.000040: kvm_exit: vcpu 0 reason hlt rip 0x2004
 h-7 [000] ..... 1.000041: kvm_nested_vmexit: vcpu 0 reason hlt rip 0x2004
 h-7 [000] ..... 1.000042: kvm_nested_vmexit_inject: reason: hlt ext_inf1: 0x0
 h-7 [000] d..1. 1.000050: kvm_entry: vcpu 0, rip 0x102d
",
        &cat.exit,
    );
    let (_, t, _) = run(&recs);
    assert_eq!(t.counts[&7].nested_exit_unresumed, 1);
    assert_eq!(t.open().into_values().sum::<u64>(), 1);
}

#[test]
fn the_text_summary_gives_the_factor_and_both_time_splits_per_nested_reason() {
    let (cat, _, t, done) = fixture(VGIF0);
    let mut stats = crate::nested_report::NestedStats::default();
    done.iter().for_each(|e| stats.add(e));
    let mut out = String::new();
    crate::text::nested_summary(&mut out, &stats.view(&cat, &t));
    assert!(out.contains("6 (5 resumed, 1 open at the end)"), "{out}");
    assert!(
        out.contains("hlt (svm): 1 nested exits, 1 resumed; guest-hypervisor exits 3.00 per nested exit (min 3, max 3): vmrun 1, stgi 1, clgi 1"),
        "{out}"
    );
    assert!(
        out.contains("handling (nested exit to vmenter) mean"),
        "{out}"
    );
    assert!(out.contains("cycle (vmenter to vmenter, 2 timed)"), "{out}");
    assert!(!out.contains("do not add up"), "{out}");
}
