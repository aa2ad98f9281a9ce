//! Reading domain XML: the fixtures into the typed model, and every kind
//! of bad input into an error that says what is wrong and where.

use hoptrace_vm::domain::Scheduler;
use hoptrace_vm::{parse, DomainError};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_patched_welotec_guest_reads_into_the_model_element_by_element() {
    let d = parse(&fixture("rhel9rt-rt.xml")).unwrap();
    assert_eq!(d.name, "RHEL9-RT");
    assert_eq!(d.hypervisor, "kvm");
    assert_eq!(d.vcpus, 4);
    let pins: Vec<(u32, String)> = d
        .cputune
        .vcpupin
        .iter()
        .map(|p| (p.id, p.cpus.to_string()))
        .collect();
    assert_eq!(
        pins,
        [
            (0, "1".into()),
            (1, "2".into()),
            (2, "3".into()),
            (3, "4".into())
        ]
    );
    assert_eq!(d.cputune.emulatorpin.as_ref().unwrap().to_string(), "0");
    assert_eq!(d.vcpusched(2).unwrap().scheduler, Scheduler::Fifo);
    assert_eq!(d.vcpusched(2).unwrap().priority, Some(1));
    assert_eq!(d.rt_vcpus(), [0, 1, 2, 3]);
    assert!(d.memory_backing.hugepages && d.memory_backing.locked);
    assert_eq!(d.memory_backing.page_sizes, ["1 G"]);
    let numa = d.numatune.as_ref().unwrap();
    assert_eq!(numa.mode.as_deref(), Some("strict"));
    assert_eq!(numa.nodeset.as_ref().unwrap().to_string(), "0");
    assert_eq!(d.features.pmu, Some(false));
    assert_eq!(d.features.vmport, Some(false));
    let cpu = d.cpu.as_ref().unwrap();
    assert_eq!(cpu.mode.as_deref(), Some("custom"));
    assert_eq!(cpu.model.as_deref(), Some("Cascadelake-Server-noTSX"));
    assert_eq!(cpu.features[0].name, "tsc-deadline");
    assert_eq!(d.timer("hpet").unwrap().present, Some(false));
    assert_eq!(
        d.timer("rtc").unwrap().tickpolicy.as_deref(),
        Some("catchup")
    );
    let nic = &d.devices.interfaces[0];
    assert_eq!(nic.kind, "bridge");
    assert_eq!(nic.source.as_deref(), Some("br0"));
    assert_eq!(nic.model.as_deref(), Some("virtio"));
    assert_eq!(nic.mac.as_deref(), Some("52:54:00:6b:3c:58"));
    assert_eq!(
        d.devices.hostdevs[0].address.as_deref(),
        Some("0000:09:00.0")
    );
    assert_eq!(d.devices.memballoon.as_deref(), Some("none"));
    assert_eq!(d.devices.watchdogs[0].action.as_deref(), Some("none"));
    assert!(d.devices.rngs.is_empty() && d.devices.sounds.is_empty());
}

#[test]
fn the_vanilla_guest_keeps_absent_elements_absent_rather_than_guessing_defaults() {
    let d = parse(&fixture("rhel9rt-vanilla.xml")).unwrap();
    assert!(d.cputune.vcpupin.is_empty() && d.cputune.emulatorpin.is_none());
    assert_eq!(d.features.pmu, None);
    assert_eq!(d.features.vmport, None);
    assert_eq!(
        d.cpu.as_ref().unwrap().mode.as_deref(),
        Some("host-passthrough")
    );
    assert_eq!(d.devices.memballoon.as_deref(), Some("virtio"));
    assert_eq!(d.devices.watchdogs[0].action.as_deref(), Some("reset"));
    assert_eq!(d.devices.rngs, ["virtio"]);
    assert_eq!(d.devices.disks[1].device, "cdrom");
    assert_eq!(d.devices.controllers[0].model.as_deref(), Some("qemu-xhci"));
    assert_eq!(d.devices.interfaces[0].driver, None);
}

#[test]
fn bytes_that_are_not_xml_say_so_with_line_and_column() {
    for (bad, line, says) in [
        (&b"hello"[..], 1, "not XML"),
        (
            b"<domain>\n  <name>x</name>\n  <vcpu>2</vcp>\n</domain>",
            3,
            "not XML",
        ),
        (b"<domain><name>\xff\xfe</name></domain>", 1, "not UTF-8"),
        (b"", 1, "not XML"),
    ] {
        let e = parse(bad).unwrap_err();
        match &e {
            DomainError::NotXml { line: l, .. } => assert_eq!(*l, line, "{e}"),
            other => panic!("{other:?}"),
        }
        assert!(e.to_string().contains(says), "{e}");
    }
    // A DTD (entity expansion) is refused, not expanded.
    let bomb = b"<!DOCTYPE d [<!ENTITY a \"aaaa\">]><domain><name>&a;</name></domain>";
    assert!(matches!(parse(bomb), Err(DomainError::NotXml { .. })));
}

#[test]
fn xml_that_is_not_a_domain_names_its_root_element() {
    let e = parse(b"<network><name>default</name></network>").unwrap_err();
    assert_eq!(
        e,
        DomainError::NotDomain {
            found: "network".into()
        }
    );
    assert!(e
        .to_string()
        .contains("the root element is <network>, expected <domain>"));
    let e = parse(b"<x:domain xmlns:x='urn:x'/>").unwrap_err();
    assert!(matches!(e, DomainError::NotDomain { .. }), "{e}");
}

#[test]
fn a_value_libvirt_would_refuse_names_the_element_and_its_line() {
    for (xml, element, says) in [
        (
            "<domain>\n<vcpu>four</vcpu></domain>",
            "vcpu",
            "vCPU count `four` is not a number",
        ),
        (
            "<domain>\n<cputune>\n<vcpupin vcpu='0' cpuset='3-1'/></cputune></domain>",
            "vcpupin",
            "runs backwards",
        ),
        (
            "<domain><cputune><vcpupin cpuset='1'/></cputune></domain>",
            "vcpupin",
            "no `vcpu` attribute",
        ),
        (
            "<domain><cputune><vcpusched vcpus='0' scheduler='deadline'/></cputune></domain>",
            "vcpusched",
            "scheduler `deadline`",
        ),
        (
            "<domain><features><pmu state='maybe'/></features></domain>",
            "pmu",
            "neither on nor off",
        ),
    ] {
        let e = parse(xml.as_bytes()).unwrap_err();
        match &e {
            DomainError::Invalid { element: el, .. } => assert_eq!(el, element, "{e}"),
            other => panic!("{xml}: {other:?}"),
        }
        assert!(e.to_string().contains(says), "{e}");
    }
    let e = parse(b"<domain>\n<cputune>\n<vcpupin vcpu='0' cpuset='3-1'/></cputune></domain>")
        .unwrap_err();
    assert!(
        e.to_string().starts_with("line 3: <vcpupin>: cpuset:"),
        "{e}"
    );
}

#[test]
fn a_minimal_domain_has_one_vcpu_as_libvirt_gives_it() {
    let d = parse(b"<domain type='qemu'><name>m</name></domain>").unwrap();
    assert_eq!(d.vcpus, 1);
    assert_eq!(d.rt_vcpus(), [0]);
}

#[test]
fn the_clock_channel_is_the_unix_socket_qemu_listens_on_for_the_hoptrace_port() {
    let d = parse(
        b"<domain type='kvm'><name>r</name><devices>\
          <channel type='unix'><source mode='bind' path='/run/a.sock'/>\
          <target type='virtio' name='org.qemu.guest_agent.0'/></channel>\
          <channel type='unix'><source mode='bind' path='/run/hoptrace/r-clock.sock'/>\
          <target type='virtio' name='org.hoptrace.clock'/></channel>\
          </devices></domain>",
    )
    .unwrap();
    assert_eq!(d.devices.channels.len(), 2);
    assert_eq!(d.devices.clock_socket(), Some("/run/hoptrace/r-clock.sock"));
    // QEMU connecting out (mode='connect') has no socket for us to join.
    let d = parse(
        b"<domain><devices><channel type='unix'><source mode='connect' path='/run/x'/>\
          <target type='virtio' name='org.hoptrace.clock'/></channel></devices></domain>",
    )
    .unwrap();
    assert_eq!(d.devices.clock_socket(), None);
    let vanilla = parse(&fixture("rhel9rt-vanilla.xml")).unwrap();
    assert_eq!(vanilla.devices.clock_socket(), None);
    assert_eq!(
        vanilla.devices.channels[0].target.as_deref(),
        Some("org.qemu.guest_agent.0")
    );
}
