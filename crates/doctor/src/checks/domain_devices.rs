//! The domain audit, the rest: memory backing and NUMA placement, the
//! guest CPU model, hypervisor features, clock timers and the devices a
//! real-time guest should not have (each one emulated by QEMU, a source of
//! exits, interrupts or host work at unpredictable times).
//!
//! Where the XML leaves an element out, the finding says what libvirt or
//! QEMU then does (a virtio balloon is added, the PMU and VMware port are
//! on, a USB controller is added on x86): the template is judged by the
//! guest it gives, not by the lines it has.

use super::domain_cpu::domain;
use crate::catalogue::{Check, Outcome, Scope, Severity};
use crate::context::Ctx;
use hoptrace_vm::Domain;

pub fn checks() -> Vec<Check> {
    use Severity::*;
    vec![
        Check {
            id: "domain.hugepages",
            title: "Guest memory backed by hugepages",
            scope: Scope::Domain,
            severity: Medium,
            source: "<memoryBacking><hugepages> of the domain XML",
            expected: "<hugepages> (1 GiB pages in the Welotec/Red Hat set-up)",
            fix: "<memoryBacking><hugepages><page size='1' unit='G'/></hugepages></memoryBacking> with pages reserved on the host (hugepagesz=1G hugepages=N)",
            disputed: None,
            run: hugepages,
        },
        Check {
            id: "domain.memory_locked",
            title: "Guest memory locked",
            scope: Scope::Domain,
            severity: Medium,
            source: "<memoryBacking><locked/>",
            expected: "<locked/>: the host never swaps or migrates the guest's pages",
            fix: "<memoryBacking><locked/></memoryBacking> (and a <memtune><hard_limit> where libvirt asks for one)",
            disputed: None,
            run: memory_locked,
        },
        Check {
            id: "domain.numatune",
            title: "Guest memory strictly on one NUMA node",
            scope: Scope::Domain,
            severity: Medium,
            source: "<numatune><memory mode= nodeset= placement=>",
            expected: "mode='strict' (libvirt's default) with a nodeset: the NIC's node",
            fix: "<numatune><memory mode='strict' nodeset='<the NIC's node>'/></numatune> (cat /sys/class/net/IFACE/device/numa_node)",
            disputed: None,
            run: numatune,
        },
        Check {
            id: "domain.memballoon",
            title: "No memory balloon",
            scope: Scope::Domain,
            severity: Medium,
            source: "<devices><memballoon model=>",
            expected: "<memballoon model='none'/> (an absent element gets a virtio balloon from libvirt)",
            fix: "<memballoon model='none'/> in <devices>",
            disputed: None,
            run: memballoon,
        },
        Check {
            id: "domain.watchdog",
            title: "No watchdog that resets the guest",
            scope: Scope::Domain,
            severity: Medium,
            source: "<devices><watchdog model= action=>",
            expected: "no <watchdog>, or action other than reset (none in the Welotec/Red Hat set-up)",
            fix: "<watchdog model='itco' action='none'/> (an absent action is reset)",
            disputed: None,
            run: watchdog,
        },
        Check {
            id: "domain.pmu",
            title: "Virtual PMU off",
            scope: Scope::Domain,
            severity: Medium,
            source: "<features><pmu state=>",
            expected: "<pmu state='off'/> (absent: the hypervisor's default, on)",
            fix: "<features><pmu state='off'/></features>",
            disputed: None,
            run: pmu,
        },
        Check {
            id: "domain.vmport",
            title: "VMware I/O port emulation off",
            scope: Scope::Domain,
            severity: Medium,
            source: "<features><vmport state=>",
            expected: "<vmport state='off'/> (absent: QEMU emulates it on x86)",
            fix: "<features><vmport state='off'/></features>",
            disputed: None,
            run: vmport,
        },
        Check {
            id: "domain.cpu_tsc_deadline",
            title: "Guest CPU with the TSC-deadline timer",
            scope: Scope::Domain,
            severity: Medium,
            source: "<cpu mode=><model><feature policy= name='tsc-deadline'>",
            expected: "mode='host-passthrough', or a model with <feature policy='require' name='tsc-deadline'/>",
            fix: "<cpu mode='custom' match='exact'><model>...</model><feature policy='require' name='tsc-deadline'/></cpu>, or <cpu mode='host-passthrough'/>",
            disputed: None,
            run: cpu_tsc_deadline,
        },
        Check {
            id: "domain.usb",
            title: "No USB controller or USB devices",
            scope: Scope::Domain,
            severity: Medium,
            source: "<devices><controller type='usb'>, <input bus='usb'> (tablet), <redirdev>",
            expected: "<controller type='usb' model='none'/> and no USB device (an absent controller is added by libvirt on x86)",
            fix: "remove USB inputs and <redirdev>; declare <controller type='usb' model='none'/>",
            disputed: None,
            run: usb,
        },
        Check {
            id: "domain.emulated_devices",
            title: "No sound, RNG or CD-ROM",
            scope: Scope::Domain,
            severity: Medium,
            source: "<devices><sound>, <rng>, <disk device='cdrom'>",
            expected: "none of them",
            fix: "remove <sound>, <rng> and <disk device='cdrom'> from <devices>",
            disputed: None,
            run: emulated_devices,
        },
        Check {
            id: "domain.timers",
            title: "Clock timers for a real-time guest",
            scope: Scope::Domain,
            severity: Medium,
            source: "<clock><timer name='rtc'|'pit'|'hpet'>",
            expected: "rtc tickpolicy='catchup', pit tickpolicy='delay', hpet present='no'",
            fix: "<clock offset='utc'><timer name='rtc' tickpolicy='catchup'/><timer name='pit' tickpolicy='delay'/><timer name='hpet' present='no'/></clock>",
            disputed: None,
            run: timers,
        },
        Check {
            id: "domain.nic_vhost",
            title: "virtio-net NICs served by vhost",
            scope: Scope::Domain,
            severity: High,
            source: "<devices><interface><model type=><driver name=>",
            expected: "model='virtio' and driver vhost (name='vhost', or absent: libvirt's default), or a passed-through NIC",
            fix: "<interface><model type='virtio'/><driver name='vhost'/></interface> (modprobe vhost_net), or <hostdev> passthrough",
            disputed: None,
            run: nic_vhost,
        },
    ]
}

/// Runs `f` on the audited domain, n/a without one.
fn with_domain(ctx: &Ctx, f: impl FnOnce(&Domain) -> Outcome) -> Outcome {
    match domain(ctx) {
        Ok(d) => f(d),
        Err(o) => o,
    }
}

fn hugepages(ctx: &Ctx) -> Outcome {
    with_domain(ctx, |d| {
        let mb = &d.memory_backing;
        match (mb.hugepages, mb.page_sizes.is_empty()) {
            (false, _) => Outcome::fail(
                "no <hugepages>: guest RAM in 4 KiB pages (TLB misses, page faults at first touch)",
            ),
            (true, true) => Outcome::pass("<hugepages> of the host's default size"),
            (true, false) => Outcome::pass(format!("<hugepages> of {}", mb.page_sizes.join(", "))),
        }
    })
}

fn memory_locked(ctx: &Ctx) -> Outcome {
    with_domain(ctx, |d| {
        if d.memory_backing.locked {
            Outcome::pass("<locked/>")
        } else {
            Outcome::fail("no <locked/>: the host may swap or migrate guest pages")
        }
    })
}

fn numatune(ctx: &Ctx) -> Outcome {
    with_domain(ctx, |d| match &d.numatune {
        None => Outcome::fail("no <numatune>: guest memory comes from any NUMA node"),
        Some(n) => {
            let mode = n.mode.as_deref().unwrap_or("strict");
            match (mode, &n.nodeset, n.placement.as_deref()) {
                ("strict", Some(set), _) => Outcome::pass(format!("strict on node {set}"))
                    .with_note("that it is the NIC's node is checked on the host, not in the XML"),
                ("strict", None, Some("auto")) => Outcome::warn(
                    "strict with placement='auto': numad picks the node, not necessarily the NIC's",
                ),
                ("strict", None, _) => Outcome::fail("strict without a nodeset: no node is chosen"),
                (m, _, _) => Outcome::fail(format!(
                    "mode='{m}': pages may come from another node than the one named"
                )),
            }
        }
    })
}

fn memballoon(ctx: &Ctx) -> Outcome {
    with_domain(ctx, |d| {
        match d.devices.memballoon.as_deref() {
        Some("none") => Outcome::pass("model='none'"),
        Some(m) => Outcome::fail(format!(
            "model='{m}': the host can take guest memory back at any time"
        )),
        None => Outcome::fail(
            "no <memballoon>: libvirt adds a virtio balloon to a QEMU domain that does not say model='none'",
        ),
    }
    })
}

fn watchdog(ctx: &Ctx) -> Outcome {
    with_domain(ctx, |d| {
        if d.devices.watchdogs.is_empty() {
            return Outcome::pass("no <watchdog>");
        }
        let all: Vec<String> = d
            .devices
            .watchdogs
            .iter()
            .map(|w| {
                format!(
                    "{} action={}",
                    w.model,
                    w.action.as_deref().unwrap_or("reset (default)")
                )
            })
            .collect();
        if d.devices
            .watchdogs
            .iter()
            .any(|w| w.action.as_deref().is_none_or(|a| a == "reset"))
        {
            Outcome::fail(format!(
                "{}: a guest starved for the watchdog's period is reset, a protection relay rebooted",
                all.join(", ")
            ))
        } else {
            Outcome::pass(all.join(", "))
        }
    })
}

fn pmu(ctx: &Ctx) -> Outcome {
    with_domain(ctx, |d| match d.features.pmu {
        Some(false) => Outcome::pass("<pmu state='off'/>"),
        Some(true) => Outcome::fail(
            "<pmu state='on'/>: PMU MSR accesses and counter overflows exit to the host",
        ),
        None => Outcome::fail("no <pmu>: the hypervisor's default, a virtual PMU, is on"),
    })
}

fn vmport(ctx: &Ctx) -> Outcome {
    with_domain(ctx, |d| match d.features.vmport {
        Some(false) => Outcome::pass("<vmport state='off'/>"),
        Some(true) => Outcome::fail("<vmport state='on'/>: QEMU emulates VMware's I/O port"),
        None => {
            Outcome::fail("no <vmport>: QEMU emulates VMware's I/O port on x86 unless told off")
        }
    })
}

fn cpu_tsc_deadline(ctx: &Ctx) -> Outcome {
    with_domain(ctx, |d| {
        let Some(cpu) = &d.cpu else {
            return Outcome::fail(
                "no <cpu>: QEMU's default model (qemu64) has no TSC-deadline timer",
            );
        };
        let feature = cpu.features.iter().find(|f| f.name == "tsc-deadline");
        let mode = cpu.mode.as_deref().unwrap_or("custom");
        match (mode, feature.map(|f| f.policy.as_str())) {
            (_, Some("disable" | "forbid")) => Outcome::fail(format!(
                "tsc-deadline {}d: the guest's timer interrupts go through the slower one-shot APIC timer",
                feature.map_or("", |f| f.policy.as_str())
            )),
            (_, Some(p @ ("require" | "force"))) => Outcome::pass(format!(
                "mode={mode} {} with tsc-deadline ({p})",
                cpu.model.as_deref().unwrap_or("")
            )),
            ("host-passthrough" | "maximum", _) => Outcome::pass(format!("mode={mode}"))
                .with_note("the guest has tsc-deadline when the host CPU has it (grep tsc_deadline_timer /proc/cpuinfo)"),
            (m, _) => Outcome::warn(format!(
                "mode={m} {} without an explicit tsc-deadline feature: depends on the model",
                cpu.model.as_deref().unwrap_or("")
            )),
        }
    })
}

fn usb(ctx: &Ctx) -> Outcome {
    with_domain(ctx, |d| {
        let dev = &d.devices;
        let mut found: Vec<String> = dev
            .controllers
            .iter()
            .filter(|c| c.kind == "usb" && c.model.as_deref() != Some("none"))
            .map(|c| {
                format!(
                    "USB controller {}",
                    c.model.as_deref().unwrap_or("(default model)")
                )
            })
            .collect();
        found.extend(
            dev.inputs
                .iter()
                .filter(|i| i.bus.as_deref() == Some("usb"))
                .map(|i| format!("USB {}", i.kind)),
        );
        found.extend(dev.redirdevs.iter().map(|b| format!("{b} redirdev")));
        let declared_none = dev
            .controllers
            .iter()
            .any(|c| c.kind == "usb" && c.model.as_deref() == Some("none"));
        if !found.is_empty() {
            Outcome::fail(found.join(", "))
        } else if declared_none {
            Outcome::pass("<controller type='usb' model='none'/>")
        } else {
            Outcome::warn(
                "no USB controller declared: libvirt adds a default one on x86 unless <controller type='usb' model='none'/> says otherwise",
            )
        }
    })
}

fn emulated_devices(ctx: &Ctx) -> Outcome {
    with_domain(ctx, |d| {
        let dev = &d.devices;
        let mut found: Vec<String> = dev.sounds.iter().map(|m| format!("sound {m}")).collect();
        found.extend(dev.rngs.iter().map(|m| format!("rng {m}")));
        found.extend(
            dev.disks
                .iter()
                .filter(|k| k.device == "cdrom")
                .map(|k| format!("CD-ROM {}", k.target.as_deref().unwrap_or("?"))),
        );
        if found.is_empty() {
            Outcome::pass("no sound, RNG or CD-ROM")
        } else {
            Outcome::fail(found.join(", "))
        }
    })
}

fn timers(ctx: &Ctx) -> Outcome {
    with_domain(ctx, |d| {
        let policy = |name: &str| d.timer(name).and_then(|t| t.tickpolicy.as_deref());
        let mut wrong = Vec::new();
        if policy("rtc") != Some("catchup") {
            wrong.push(format!(
                "rtc tickpolicy {}",
                policy("rtc").unwrap_or("unset")
            ));
        }
        if policy("pit") != Some("delay") {
            wrong.push(format!(
                "pit tickpolicy {}",
                policy("pit").unwrap_or("unset")
            ));
        }
        if d.timer("hpet").and_then(|t| t.present) != Some(false) {
            wrong.push("hpet present (QEMU's default on x86)".into());
        }
        if wrong.is_empty() {
            Outcome::pass("rtc catchup, pit delay, hpet off")
        } else {
            Outcome::fail(wrong.join(", "))
        }
    })
}

fn nic_vhost(ctx: &Ctx) -> Outcome {
    with_domain(ctx, |d| {
        let dev = &d.devices;
        let pci_passthrough = dev.hostdevs.iter().filter(|h| h.kind == "pci").count();
        if dev.interfaces.is_empty() && pci_passthrough == 0 {
            return Outcome::not_applicable(
                "no <interface> and no PCI <hostdev>: the guest has no NIC to check",
            );
        }
        let mut bad = Vec::new();
        let mut good = Vec::new();
        for (i, n) in dev.interfaces.iter().enumerate() {
            let name = n.target.clone().unwrap_or_else(|| format!("interface {i}"));
            let model = n.model.as_deref().unwrap_or("(default model)");
            if n.kind == "hostdev" || n.kind == "vhostuser" || n.kind == "vdpa" {
                good.push(format!("{name}: type={}", n.kind));
            } else if model != "virtio" {
                bad.push(format!("{name}: model {model}, emulated by QEMU"));
            } else if n.driver.as_deref() == Some("qemu") {
                bad.push(format!("{name}: virtio with driver name='qemu' (userspace virtio-net in QEMU's main loop)"));
            } else {
                good.push(format!(
                    "{name}: virtio, driver {}",
                    n.driver
                        .as_deref()
                        .unwrap_or("default (vhost when /dev/vhost-net exists)")
                ));
            }
        }
        if pci_passthrough > 0 {
            good.push(format!(
                "{pci_passthrough} PCI device(s) passed through (<hostdev>)"
            ));
        }
        if bad.is_empty() {
            Outcome::pass(good.join("; "))
        } else {
            Outcome::fail(bad.join("; ")).with_details(good)
        }
    })
}
