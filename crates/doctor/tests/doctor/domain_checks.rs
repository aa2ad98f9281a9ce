//! The domain audit (`doctor --domain-xml`): the exact status of every
//! domain check on the two fixtures of `crates/vm/tests/fixtures` (the
//! Welotec/Red Hat guest before and after its real-time patch), then each
//! check's other verdicts on one-line changes of the patched domain.

use crate::fixture::Fixture;
use hoptrace_doctor::cpulist::CpuSet;
use hoptrace_doctor::{audit_domain, catalogue, DomainInput, Options, Report, Root, Scope, Status};

fn fixture_text(name: &str) -> String {
    let path = format!("{}/../vm/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The audit of `xml` against `root` (the host's RT CPUs come from it
/// unless `isolated` declares them).
fn audit_on(xml: &str, root: &Root, isolated: Option<&str>) -> Report {
    let opts = Options {
        domain: Some(DomainInput {
            source: "test.xml".into(),
            domain: hoptrace_vm::parse(xml.as_bytes()).expect("the fixture reads"),
            running: None,
        }),
        isolated: isolated.map(|s| CpuSet::parse_list(s, None).unwrap()),
        ..Options::default()
    };
    audit_domain(root, &opts).unwrap()
}

/// The audit with the seed's isolated CPUs (tuned isolated_cores=1-7).
fn audit(xml: &str) -> Report {
    audit_on(xml, &Root::new("/nonexistent-root"), Some("1-7"))
}

fn statuses(r: &Report) -> Vec<(&'static str, Status)> {
    r.checks.iter().map(|c| (c.id, c.status)).collect()
}

fn status(r: &Report, id: &str) -> Status {
    r.checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no check {id}"))
        .status
}

use Status::{Fail, NotApplicable as NA, Pass, Warn};

#[test]
fn the_vanilla_welotec_guest_fails_every_pinning_and_device_check_the_patch_fixes() {
    let r = audit(&fixture_text("rhel9rt-vanilla.xml"));
    assert_eq!(
        statuses(&r),
        [
            ("domain.vcpu_pinned", Fail),
            ("domain.vcpu_isolated", Fail),
            ("domain.vcpu_exclusive", Fail),
            ("domain.emulatorpin", Fail),
            ("domain.iothreadpin", NA),
            ("domain.vcpusched", Fail),
            ("domain.hugepages", Pass),
            ("domain.memory_locked", Pass),
            ("domain.numatune", Pass),
            ("domain.memballoon", Fail),
            ("domain.watchdog", Fail),
            ("domain.pmu", Fail),
            ("domain.vmport", Fail),
            ("domain.cpu_tsc_deadline", Pass),
            ("domain.usb", Fail),
            ("domain.emulated_devices", Fail),
            ("domain.timers", Pass),
            ("domain.nic_vhost", Pass),
            // a file: nothing running to compare (--vm)
            ("domain.live_vcpu_affinity", NA),
            ("domain.live_vcpu_sched", NA),
            ("domain.live_emulator_affinity", NA),
        ]
    );
    assert_eq!(r.summary.scope, "domain RHEL9-RT (test.xml)");
    let usb = r.checks.iter().find(|c| c.id == "domain.usb").unwrap();
    assert_eq!(usb.found, "USB controller qemu-xhci");
    assert!(usb.fix.contains("<controller type='usb' model='none'/>"));
    let dev = r
        .checks
        .iter()
        .find(|c| c.id == "domain.emulated_devices")
        .unwrap();
    assert_eq!(dev.found, "rng virtio, CD-ROM sda");
    assert!(r.strict_failure(), "high checks fail");
}

#[test]
fn the_patched_welotec_guest_passes_all_but_the_usb_controller_libvirt_adds_back() {
    let r = audit(&fixture_text("rhel9rt-rt.xml"));
    assert_eq!(
        statuses(&r),
        [
            ("domain.vcpu_pinned", Pass),
            ("domain.vcpu_isolated", Pass),
            ("domain.vcpu_exclusive", Pass),
            ("domain.emulatorpin", Pass),
            ("domain.iothreadpin", NA),
            ("domain.vcpusched", Pass),
            ("domain.hugepages", Pass),
            ("domain.memory_locked", Pass),
            ("domain.numatune", Pass),
            ("domain.memballoon", Pass),
            ("domain.watchdog", Pass),
            ("domain.pmu", Pass),
            ("domain.vmport", Pass),
            ("domain.cpu_tsc_deadline", Pass),
            ("domain.usb", Warn),
            ("domain.emulated_devices", Pass),
            ("domain.timers", Pass),
            ("domain.nic_vhost", Pass),
            // a file: nothing running to compare (--vm)
            ("domain.live_vcpu_affinity", NA),
            ("domain.live_vcpu_sched", NA),
            ("domain.live_emulator_affinity", NA),
        ]
    );
    let iso = r
        .checks
        .iter()
        .find(|c| c.id == "domain.vcpu_isolated")
        .unwrap();
    assert_eq!(iso.found, "RT vCPUs on CPUs 1-4, all host RT CPUs");
    assert_eq!(
        iso.note.as_deref(),
        Some("host RT CPUs 1-7 (--isolated 1-7)")
    );
    assert!(!r.strict_failure());
}

#[test]
fn without_isolated_the_audited_hosts_rt_cpus_are_used_and_none_is_not_applicable() {
    let rt = fixture_text("rhel9rt-rt.xml");
    // The doctor's tuned fixture isolates CPUs 2-3: vCPUs on 1 and 4 are outside.
    let host = Fixture::rt_host();
    let r = audit_on(&rt, &host.root(), None);
    assert_eq!(status(&r, "domain.vcpu_isolated"), Fail);
    let c = r
        .checks
        .iter()
        .find(|c| c.id == "domain.vcpu_isolated")
        .unwrap();
    assert_eq!(
        c.found,
        "vCPU 0 on CPUs 1, vCPU 3 on CPUs 4 outside the host RT CPUs 2-3"
    );
    assert_eq!(status(&r, "domain.emulatorpin"), Pass);
    // A host that isolates nothing: nothing to compare with.
    let plain = Fixture::rt_host();
    plain
        .write("/sys/devices/system/cpu/isolated", "\n")
        .write("/sys/devices/system/cpu/nohz_full", "(null)\n");
    let r = audit_on(&rt, &plain.root(), None);
    assert_eq!(status(&r, "domain.vcpu_isolated"), NA);
    assert_eq!(status(&r, "domain.emulatorpin"), Pass);
    // A root with neither sysfs nor /proc/cmdline: unknown, never a pass.
    let r = audit_on(&rt, &Root::new("/nonexistent-root"), None);
    assert_eq!(status(&r, "domain.vcpu_isolated"), Status::Unknown);
}

/// (check, text in rhel9rt-rt.xml, its replacement, expected status)
type Change = (&'static str, &'static str, &'static str, Status);

/// One line changed in the patched fixture, and what each check then says.
const ONE_LINE_CHANGES: &[Change] = &[
    (
        "domain.vcpu_pinned",
        "<vcpupin vcpu='3' cpuset='4'/>",
        "",
        Fail,
    ),
    (
        "domain.vcpu_pinned",
        "<vcpupin vcpu='3' cpuset='4'/>",
        "<vcpupin vcpu='3' cpuset='4-5'/>",
        Fail,
    ),
    (
        "domain.vcpu_pinned",
        "<vcpupin vcpu='3' cpuset='4'/>",
        "<vcpupin vcpu='3' cpuset='4'/><vcpupin vcpu='4' cpuset='5'/>",
        Fail,
    ),
    (
        "domain.vcpu_isolated",
        "<vcpupin vcpu='3' cpuset='4'/>",
        "<vcpupin vcpu='3' cpuset='0'/>",
        Fail,
    ),
    (
        "domain.vcpu_exclusive",
        "<vcpupin vcpu='3' cpuset='4'/>",
        "<vcpupin vcpu='3' cpuset='3'/>",
        Fail,
    ),
    ("domain.emulatorpin", "<emulatorpin cpuset='0'/>", "", Fail),
    (
        "domain.emulatorpin",
        "<emulatorpin cpuset='0'/>",
        "<emulatorpin cpuset='0-1'/>",
        Fail,
    ),
    (
        "domain.emulatorpin",
        "<emulatorpin cpuset='0'/>",
        "<emulatorpin cpuset='5'/>",
        Fail,
    ),
    (
        "domain.iothreadpin",
        "<vcpu placement='static'>4</vcpu>",
        "<vcpu placement='static'>4</vcpu><iothreads>1</iothreads>",
        Fail,
    ),
    (
        "domain.iothreadpin",
        "<emulatorpin cpuset='0'/>",
        "<emulatorpin cpuset='0'/><iothreadpin iothread='1' cpuset='0'/>",
        NA,
    ),
    (
        "domain.vcpusched",
        "<vcpusched vcpus='0' scheduler='fifo' priority='1'/>",
        "",
        Warn,
    ),
    // The last vcpusched naming a vCPU wins, as in libvirt: only vCPU 0 is batch.
    (
        "domain.vcpusched",
        "<vcpusched vcpus='0' scheduler='fifo' priority='1'/>",
        "<vcpusched vcpus='0-3' scheduler='batch'/>",
        Warn,
    ),
    ("domain.hugepages", "<page size='1' unit='G'/>", "", Pass),
    ("domain.memory_locked", "<locked/>", "", Fail),
    (
        "domain.numatune",
        "mode='strict' nodeset='0'",
        "mode='preferred' nodeset='0'",
        Fail,
    ),
    (
        "domain.numatune",
        "mode='strict' nodeset='0'",
        "mode='strict' placement='auto'",
        Warn,
    ),
    ("domain.memballoon", "<memballoon model='none'/>", "", Fail),
    ("domain.watchdog", "action='none'", "", Fail),
    (
        "domain.watchdog",
        "<watchdog model='itco' action='none'/>",
        "",
        Pass,
    ),
    ("domain.pmu", "<pmu state='off'/>", "<pmu/>", Fail),
    ("domain.vmport", "<vmport state='off'/>", "", Fail),
    (
        "domain.cpu_tsc_deadline",
        "policy='require' name='tsc-deadline'",
        "policy='disable' name='tsc-deadline'",
        Fail,
    ),
    (
        "domain.cpu_tsc_deadline",
        "<feature policy='require' name='tsc-deadline'/>",
        "",
        Warn,
    ),
    (
        "domain.usb",
        "<controller type='pci'",
        "<controller type='usb' model='none'/><controller type='pci'",
        Pass,
    ),
    (
        "domain.usb",
        "<input type='mouse' bus='ps2'/>",
        "<input type='tablet' bus='usb'/>",
        Fail,
    ),
    (
        "domain.emulated_devices",
        "<audio id='1' type='none'/>",
        "<sound model='ich9'/>",
        Fail,
    ),
    (
        "domain.timers",
        "<timer name='hpet' present='no'/>",
        "",
        Fail,
    ),
    (
        "domain.timers",
        "tickpolicy='catchup'",
        "tickpolicy='merge'",
        Fail,
    ),
    (
        "domain.nic_vhost",
        "<model type='virtio'/>",
        "<model type='e1000e'/>",
        Fail,
    ),
    (
        "domain.nic_vhost",
        "<model type='virtio'/>",
        "<model type='virtio'/><driver name='qemu'/>",
        Fail,
    ),
];

#[test]
fn each_domain_check_fails_or_warns_on_the_line_that_breaks_it() {
    let base = fixture_text("rhel9rt-rt.xml");
    for (id, from, to, want) in ONE_LINE_CHANGES {
        assert_eq!(
            base.matches(from).count(),
            1,
            "{id}: `{from}` must be in the fixture once"
        );
        let r = audit(&base.replacen(from, to, 1));
        let c = r.checks.iter().find(|c| c.id == *id).unwrap();
        assert_eq!(c.status, *want, "{id} with `{from}` -> `{to}`: {c:#?}");
    }
    let start = base.find("<memoryBacking>").unwrap();
    let end = base.find("</memoryBacking>").unwrap() + "</memoryBacking>".len();
    let r = audit(&format!("{}{}", &base[..start], &base[end..]));
    assert_eq!(status(&r, "domain.hugepages"), Fail);
    assert_eq!(status(&r, "domain.memory_locked"), Fail);
    let r = audit(&base.replace("scheduler='fifo'", "scheduler='other'"));
    assert_eq!(status(&r, "domain.vcpusched"), Fail);
    // SCHED_OTHER vCPUs are no RT vCPUs: every vCPU is then audited as one.
    assert_eq!(status(&r, "domain.vcpu_exclusive"), Pass);
}

#[test]
fn every_domain_check_names_the_xml_element_it_reads_and_its_fix() {
    let domain: Vec<_> = catalogue()
        .into_iter()
        .filter(|c| c.scope == Scope::Domain)
        .collect();
    assert!(domain.len() >= 18, "{} domain checks", domain.len());
    for c in domain {
        assert!(c.id.starts_with("domain."), "{}", c.id);
        assert!(
            c.source.contains('<'),
            "{}: source names no element: {}",
            c.id,
            c.source
        );
        assert!(
            c.fix.contains('<'),
            "{}: fix names no element: {}",
            c.id,
            c.fix
        );
    }
}
