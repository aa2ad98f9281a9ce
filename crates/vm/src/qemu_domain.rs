//! What a QEMU command line says about the settings the domain audit
//! judges, read into the same [`Domain`] model as libvirt's XML, so that
//! `hoptrace doctor --vm NAME` audits a QEMU process that no libvirt
//! manages with the same checks. Pure: the options in, the settings out.
//!
//! | domain element | from the command line |
//! |---|---|
//! | `<cpu>` | `-cpu MODEL,...`: `host` is host-passthrough, `max` maximum, any other a custom MODEL; `+feat` or `feat=on` require a feature, `-feat` or `feat=off` disable it |
//! | `<features><pmu>` | `-cpu ...,pmu=on\|off` |
//! | `<features><vmport>` | `-machine ...,vmport=on\|off` |
//! | `<timer>` | `-rtc ...,driftfix=slew`: rtc catchup; `-global kvm-pit.lost_tick_policy=delay`: pit delay; `-no-hpet` or `-machine ...,hpet=off`: no hpet |
//! | `<memballoon>` | a `-device virtio-balloon*`: `virtio`; none: `none` (QEMU adds no balloon of its own) |
//! | `<watchdog>` | a `-device i6300esb\|ib700\|diag288` (or `-watchdog MODEL`) with `-watchdog-action ACTION` (QEMU's default `reset`) |
//! | USB | none unless `-usb`, `-machine ...,usb=on` or a USB host controller `-device` (`qemu-xhci`, `nec-usb-xhci`, `usb-ehci`, `ich9-usb-*`, `piix3-usb-uhci`, `piix4-usb-uhci`); `usb-tablet`, `usb-mouse`, `usb-kbd`: inputs on usb; `usb-redir`: a redirdev |
//! | sound | `-device intel-hda\|ich9-intel-hda\|AC97\|sb16\|es1370\|hda-*`, `-soundhw` |
//! | `<rng>` | `-device virtio-rng-*` |
//! | CD-ROM | `-cdrom`, `-drive ...,media=cdrom`, `-device ide-cd\|scsi-cd`; on a `pc` (i440fx) machine without `-nodefaults`, the empty IDE CD-ROM QEMU adds by itself |
//! | `<numatune>` | `-object memory-backend-*,host-nodes=N,policy=bind\|preferred\|interleave`: strict, preferred, interleave on N |
//! | `<hostdev>` | `-device vfio-pci,host=ADDR` |
//!
//! What no command line says, where the threads may run and how they are
//! scheduled (`taskset`, `chrt`, cgroups set that from outside), comes from
//! the running threads ([`crate::resolved_qemu`]).

use crate::cpuset::Cpus;
use crate::domain::{
    Controller, CpuFeature, CpuModel, Disk, Domain, HostDev, Input, NumaMemory, Timer, Watchdog,
};
use crate::qemu_cmdline::{on, parse_option_list, OptionMap};

const USB_CONTROLLERS: &[&str] = &[
    "qemu-xhci",
    "nec-usb-xhci",
    "usb-ehci",
    "piix3-usb-uhci",
    "piix4-usb-uhci",
];
const SOUND: &[&str] = &["intel-hda", "ich9-intel-hda", "AC97", "sb16", "es1370"];
const WATCHDOGS: &[&str] = &["i6300esb", "ib700", "diag288"];

/// Fill `d` with what the command line's `options` (name without dashes,
/// value) say of the audited settings.
pub fn apply_settings(d: &mut Domain, options: &[(String, String)]) {
    let mut watchdog_action: Option<String> = None;
    let mut nodefaults = false;
    let mut pc_machine = true;
    let mut cdrom = false;
    for (opt, value) in options {
        let map = parse_option_list(value);
        match opt.as_str() {
            "cpu" => d.cpu = Some(cpu_model(&map, &mut d.features.pmu)),
            "machine" | "M" => {
                let kind = map.get("type").or(map.get("")).cloned().unwrap_or_default();
                pc_machine = kind.is_empty() || kind == "pc" || kind.starts_with("pc-i440fx");
                if let Some(v) = on(map.get("vmport")) {
                    d.features.vmport = Some(v);
                }
                if on(map.get("usb")) == Some(true) {
                    d.devices.controllers.push(usb_controller("default"));
                }
                if on(map.get("hpet")) == Some(false) {
                    set_timer(d, "hpet", Some(false), None);
                }
            }
            "no-hpet" => set_timer(d, "hpet", Some(false), None),
            "rtc" if map.get("driftfix").map(String::as_str) == Some("slew") => {
                set_timer(d, "rtc", None, Some("catchup"));
            }
            "global" if value == "kvm-pit.lost_tick_policy=delay" => {
                set_timer(d, "pit", None, Some("delay"));
            }
            "nodefaults" => nodefaults = true,
            "usb" => d.devices.controllers.push(usb_controller("default")),
            "cdrom" => cdrom = true,
            "drive" if map.get("media").map(String::as_str) == Some("cdrom") => cdrom = true,
            "soundhw" => d.devices.sounds.push(value.clone()),
            "watchdog" => d.devices.watchdogs.push(Watchdog {
                model: value.clone(),
                action: None,
            }),
            "watchdog-action" => watchdog_action = Some(value.clone()),
            "device" => device(d, &map, &mut cdrom),
            "object" => {
                if let Some(n) = numa_memory(&map) {
                    d.numatune = Some(n);
                }
            }
            _ => {}
        }
    }
    if !nodefaults && pc_machine && !cdrom {
        // QEMU's default CD-ROM (index 2 of the IDE bus) on i440fx.
        cdrom = true;
    }
    if cdrom {
        d.devices.disks.push(Disk {
            device: "cdrom".into(),
            target: None,
        });
    }
    for w in &mut d.devices.watchdogs {
        w.action = Some(watchdog_action.clone().unwrap_or_else(|| "reset".into()));
    }
    if d.devices.memballoon.is_none() {
        d.devices.memballoon = Some("none".into());
    }
    // QEMU adds no USB controller unless asked (`-usb`, `-machine usb=on`,
    // a controller device): libvirt's explicit `model='none'`.
    if !d.devices.controllers.iter().any(|c| c.kind == "usb") {
        d.devices.controllers.push(usb_controller("none"));
    }
}

fn cpu_model(map: &OptionMap, pmu: &mut Option<bool>) -> CpuModel {
    let model = map.get("").cloned().unwrap_or_default();
    let mode = match model.as_str() {
        "host" => "host-passthrough",
        "max" => "maximum",
        _ => "custom",
    };
    let mut features = Vec::new();
    for (k, v) in map.iter().filter(|(k, _)| !k.is_empty()) {
        let (name, wanted) = if let Some(f) = k.strip_prefix('+') {
            (f, Some(true))
        } else if let Some(f) = k.strip_prefix('-') {
            (f, Some(false))
        } else {
            (k.as_str(), on(Some(v)))
        };
        let Some(wanted) = wanted else { continue };
        if name == "pmu" {
            *pmu = Some(wanted);
            continue;
        }
        features.push(CpuFeature {
            policy: if wanted { "require" } else { "disable" }.into(),
            name: name.to_string(),
        });
    }
    CpuModel {
        mode: Some(mode.into()),
        model: (mode == "custom").then_some(model),
        features,
    }
}

fn set_timer(d: &mut Domain, name: &str, present: Option<bool>, tickpolicy: Option<&str>) {
    d.timers.retain(|t| t.name != name);
    d.timers.push(Timer {
        name: name.into(),
        present,
        tickpolicy: tickpolicy.map(str::to_string),
    });
}

fn usb_controller(model: &str) -> Controller {
    Controller {
        kind: "usb".into(),
        model: Some(model.into()),
    }
}

fn device(d: &mut Domain, map: &OptionMap, cdrom: &mut bool) {
    let driver = map
        .get("driver")
        .or(map.get(""))
        .cloned()
        .unwrap_or_default();
    let dv = &mut d.devices;
    match driver.as_str() {
        x if USB_CONTROLLERS.contains(&x) || x.starts_with("ich9-usb-") => {
            dv.controllers.push(usb_controller(x));
        }
        "usb-tablet" | "usb-mouse" | "usb-kbd" => dv.inputs.push(Input {
            kind: driver.trim_start_matches("usb-").into(),
            bus: Some("usb".into()),
        }),
        "usb-redir" => dv.redirdevs.push("usb".into()),
        x if SOUND.contains(&x) || x.starts_with("hda-") => dv.sounds.push(driver.clone()),
        x if x.starts_with("virtio-rng") => dv.rngs.push("virtio".into()),
        x if x.starts_with("virtio-balloon") => dv.memballoon = Some("virtio".into()),
        x if WATCHDOGS.contains(&x) => dv.watchdogs.push(Watchdog {
            model: driver.clone(),
            action: None,
        }),
        "ide-cd" | "scsi-cd" => *cdrom = true,
        "vfio-pci" => dv.hostdevs.push(HostDev {
            kind: "pci".into(),
            address: map.get("host").cloned(),
        }),
        _ => {}
    }
}

fn numa_memory(map: &OptionMap) -> Option<NumaMemory> {
    let kind = map.get("qom-type").or(map.get(""))?;
    if !kind.starts_with("memory-backend-") {
        return None;
    }
    let nodes = map.get("host-nodes")?;
    let mode = match map.get("policy").map(String::as_str) {
        Some("bind") => "strict",
        Some("preferred") => "preferred",
        Some("interleave") => "interleave",
        _ => return None,
    };
    Some(NumaMemory {
        mode: Some(mode.into()),
        nodeset: Cpus::parse(&nodes.replace(';', ",")).ok(),
        placement: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qemu_cmdline::options;

    fn domain_of(args: &[&str]) -> Domain {
        let argv: Vec<String> = std::iter::once("qemu-system-x86_64")
            .chain(args.iter().copied())
            .map(str::to_string)
            .collect();
        let mut d = Domain::default();
        apply_settings(&mut d, &options(&argv));
        d
    }

    #[test]
    fn a_tuned_command_line_reads_as_the_tuned_domain() {
        let d = domain_of(&[
            "-nodefaults",
            "-machine",
            "q35,accel=kvm,vmport=off,hpet=off",
            "-cpu",
            "host,+tsc-deadline,pmu=off",
            "-rtc",
            "base=utc,driftfix=slew",
            "-global",
            "kvm-pit.lost_tick_policy=delay",
            "-object",
            "memory-backend-file,id=m0,size=1G,mem-path=/dev/hugepages,host-nodes=0,policy=bind",
            "-device",
            "vfio-pci,host=0000:09:00.0",
        ]);
        let cpu = d.cpu.as_ref().unwrap();
        assert_eq!(cpu.mode.as_deref(), Some("host-passthrough"));
        assert_eq!(cpu.features.len(), 1);
        assert_eq!(
            (
                cpu.features[0].name.as_str(),
                cpu.features[0].policy.as_str()
            ),
            ("tsc-deadline", "require")
        );
        assert_eq!(
            (d.features.pmu, d.features.vmport),
            (Some(false), Some(false))
        );
        assert_eq!(d.timer("hpet").unwrap().present, Some(false));
        assert_eq!(
            d.timer("rtc").unwrap().tickpolicy.as_deref(),
            Some("catchup")
        );
        assert_eq!(d.timer("pit").unwrap().tickpolicy.as_deref(), Some("delay"));
        let n = d.numatune.as_ref().unwrap();
        assert_eq!(n.mode.as_deref(), Some("strict"));
        assert_eq!(n.nodeset.as_ref().unwrap().to_string(), "0");
        assert_eq!(d.devices.memballoon.as_deref(), Some("none"));
        assert!(d.devices.disks.is_empty());
        assert_eq!(d.devices.controllers[0].model.as_deref(), Some("none"));
        assert_eq!(
            d.devices.hostdevs[0].address.as_deref(),
            Some("0000:09:00.0")
        );
    }

    #[test]
    fn a_desktop_command_line_has_its_usb_sound_rng_balloon_cdrom_and_watchdog() {
        let d = domain_of(&[
            "-usb",
            "-device",
            "usb-tablet",
            "-device",
            "intel-hda",
            "-device",
            "virtio-rng-pci",
            "-device",
            "virtio-balloon-pci",
            "-device",
            "i6300esb",
            "-cpu",
            "qemu64,-x2apic",
        ]);
        assert_eq!(d.devices.controllers.len(), 1);
        assert_eq!(d.devices.inputs[0].kind, "tablet");
        assert_eq!(d.devices.sounds, vec!["intel-hda".to_string()]);
        assert_eq!(d.devices.rngs.len(), 1);
        assert_eq!(d.devices.memballoon.as_deref(), Some("virtio"));
        // pc machine, no -nodefaults: QEMU's own CD-ROM.
        assert_eq!(d.devices.disks[0].device, "cdrom");
        // QEMU's default watchdog action.
        assert_eq!(d.devices.watchdogs[0].action.as_deref(), Some("reset"));
        let cpu = d.cpu.as_ref().unwrap();
        assert_eq!(cpu.model.as_deref(), Some("qemu64"));
        assert_eq!(cpu.features[0].policy, "disable");
        assert_eq!(d.features.pmu, None);
    }

    #[test]
    fn a_watchdog_action_given_is_the_watchdogs() {
        let d = domain_of(&[
            "-machine",
            "q35",
            "-watchdog-action",
            "none",
            "-device",
            "ib700",
        ]);
        assert_eq!(d.devices.watchdogs[0].action.as_deref(), Some("none"));
        assert!(d.devices.disks.is_empty(), "q35 adds no CD-ROM of its own");
    }
}
