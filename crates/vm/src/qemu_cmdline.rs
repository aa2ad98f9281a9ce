//! A QEMU command line, read for what hoptrace needs of a VM that no
//! libvirt manages: its name, accelerator, vCPU count, NICs, QMP socket and
//! memory options. Pure: the argument vector in, a typed model out.
//!
//! Mechanism: QEMU options are `-opt VALUE` pairs (also `--opt`). A VALUE
//! is either QEMU's key=value list (`tap,id=n0,ifname=tap0,vhost=on`: the
//! first item may be an implied key, a comma inside a value is written
//! `,,`) or, for `-netdev`, `-device` and `-object` of newer QEMU and of
//! libvirt, a JSON object (`{"type":"tap","id":"n0",...}`); both read into
//! the same key/value map. What is taken from which option:
//!
//! | what | options |
//! |---|---|
//! | name, thread names | `-name NAME` or `-name guest=NAME`, `debug-threads=on` |
//! | accelerator (configured) | `-accel kvm`, `-enable-kvm`, `-machine ...,accel=kvm`; else TCG |
//! | vCPUs | `-smp N` or `-smp cpus=N,...`; else 1 |
//! | NICs | `-netdev tap,id=ID,ifname=..,vhost=..,queues=..` with the `-device MODEL,netdev=ID,mac=..` that uses it; `-nic tap,...,model=..,mac=..` |
//! | QMP socket | `-qmp unix:PATH,...`; `-chardev socket,id=C,path=PATH` with `-mon chardev=C,mode=control` |
//! | clock port | `-device virtserialport,chardev=C,name=org.hoptrace.clock` with `-chardev socket,id=C,path=PATH` |
//! | memory | hugepages: `-mem-path` or a `memory-backend-file` whose `mem-path` is under a hugetlbfs mount name (`hugepages`); locked: `-overcommit mem-lock=on`, `-realtime mlock=on` |
//!
//! The command line says what was asked for; the running process says what
//! is (its tun file descriptors name its taps, its `/dev/kvm` descriptor
//! the accelerator): [`crate::qemu_process`] reads those and prefers them.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// One option value as a key/value map (`""` holds the implied first item).
pub type OptionMap = BTreeMap<String, String>;

/// A NIC as the command line configures it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CmdlineNic {
    /// The `-netdev` id (empty for `-nic`).
    pub id: String,
    /// The netdev type: `tap`, `bridge`, `user`, `vhost-user`, ...
    pub backend: String,
    /// `ifname=`: the host tap's name, when the command line names it.
    pub ifname: Option<String>,
    /// `vhost=on|off` as given.
    pub vhost: Option<bool>,
    pub queues: Option<u32>,
    /// The front end's model (`virtio-net-pci`, `e1000`, ...).
    pub model: Option<String>,
    pub mac: Option<String>,
}

/// What a QEMU command line configures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QemuCmdline {
    /// `-name`.
    pub name: Option<String>,
    /// `-name ...,debug-threads=on`: QEMU names its threads (`CPU 0/KVM`).
    pub debug_threads: bool,
    /// Accelerators in the order given (`kvm`, `tcg`); empty means TCG.
    pub accels: Vec<String>,
    pub vcpus: u32,
    pub nics: Vec<CmdlineNic>,
    /// QMP unix sockets (the first one that answers is used).
    pub qmp_sockets: Vec<PathBuf>,
    /// QMP endpoints that are not unix sockets (named in notes, not used).
    pub other_qmp: Vec<String>,
    pub hugepages: bool,
    pub mem_locked: bool,
    /// The unix socket behind the virtio-serial port `org.hoptrace.clock`
    /// (`-device virtserialport,chardev=C,name=org.hoptrace.clock` with
    /// `-chardev socket,id=C,path=PATH`).
    pub clock_socket: Option<PathBuf>,
    /// Every option as read (name without dashes, value): the settings the
    /// domain audit judges are read from them ([`crate::qemu_domain`]).
    pub options: Vec<(String, String)>,
}

/// Split QEMU's `key=value,...` list; `,,` is a literal comma.
pub fn parse_option_list(value: &str) -> OptionMap {
    let trimmed = value.trim();
    if trimmed.starts_with('{') {
        if let Ok(serde_json::Value::Object(o)) = serde_json::from_str(trimmed) {
            return o
                .into_iter()
                .map(|(k, v)| {
                    let text = match v {
                        serde_json::Value::String(s) => s,
                        serde_json::Value::Bool(b) => if b { "on" } else { "off" }.to_string(),
                        other => other.to_string(),
                    };
                    (k, text)
                })
                .collect();
        }
    }
    let mut items = Vec::new();
    let mut cur = String::new();
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ',' {
            if chars.peek() == Some(&',') {
                chars.next();
                cur.push(',');
            } else {
                items.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(c);
        }
    }
    items.push(cur);
    let mut map = OptionMap::new();
    for (i, item) in items.into_iter().enumerate() {
        match item.split_once('=') {
            Some((k, v)) => {
                map.insert(k.to_string(), v.to_string());
            }
            None if i == 0 => {
                map.insert(String::new(), item);
            }
            // A bare flag (`server`, `nowait`): QEMU's old boolean form.
            None => {
                map.insert(item, "on".into());
            }
        }
    }
    map
}

pub(crate) fn on(v: Option<&String>) -> Option<bool> {
    match v.map(String::as_str) {
        Some("on" | "yes" | "true") => Some(true),
        Some("off" | "no" | "false") => Some(false),
        _ => None,
    }
}

/// The options of `argv` as (name without dashes, value) pairs; a flag
/// without a value (`-enable-kvm`, `-nodefaults`) gets an empty value.
pub(crate) fn options(argv: &[String]) -> Vec<(String, String)> {
    // Options that take no value (the ones a VM's command line commonly
    // has); every other option takes the next argument.
    const FLAGS: &[&str] = &[
        "enable-kvm",
        "nodefaults",
        "no-reboot",
        "no-shutdown",
        "nographic",
        "daemonize",
        "S",
        "no-hpet",
        "no-user-config",
        "snapshot",
        "no-acpi",
        "usb",
    ];
    let mut out = Vec::new();
    let mut i = 1;
    while i < argv.len() {
        let a = &argv[i];
        let Some(name) = a.strip_prefix("--").or_else(|| a.strip_prefix('-')) else {
            i += 1;
            continue;
        };
        if FLAGS.contains(&name) || i + 1 >= argv.len() {
            out.push((name.to_string(), String::new()));
            i += 1;
        } else {
            out.push((name.to_string(), argv[i + 1].clone()));
            i += 2;
        }
    }
    out
}

fn name_of(map: &OptionMap) -> Option<String> {
    map.get("guest")
        .or_else(|| map.get(""))
        .filter(|s| !s.is_empty())
        .cloned()
}

/// Read a QEMU argument vector (`argv[0]` is the program).
pub fn parse(argv: &[String]) -> QemuCmdline {
    let mut c = QemuCmdline {
        vcpus: 1,
        ..QemuCmdline::default()
    };
    let mut devices: Vec<OptionMap> = Vec::new();
    let mut chardevs: BTreeMap<String, String> = BTreeMap::new();
    let mut monitors: Vec<OptionMap> = Vec::new();
    c.options = options(argv);
    for (opt, value) in c.options.clone() {
        let map = parse_option_list(&value);
        match opt.as_str() {
            "name" => {
                c.name = name_of(&map);
                c.debug_threads = on(map.get("debug-threads")).unwrap_or(false);
            }
            "accel" => c.accels.extend(map.get("").cloned()),
            "enable-kvm" => c.accels.push("kvm".into()),
            "machine" | "M" => {
                if let Some(a) = map.get("accel") {
                    c.accels.extend(a.split(':').map(str::to_string));
                }
            }
            "smp" => {
                let n = map.get("cpus").or_else(|| map.get(""));
                if let Some(n) = n.and_then(|n| n.parse().ok()) {
                    c.vcpus = n;
                }
            }
            "netdev" => c.nics.push(nic_of(&map, map.get("type").or(map.get("")))),
            "nic" => {
                let mut nic = nic_of(&map, map.get(""));
                nic.model = map.get("model").cloned();
                nic.mac = map.get("mac").cloned();
                c.nics.push(nic);
            }
            "device" => devices.push(map),
            "qmp" | "qmp-pretty" => {
                let path = value
                    .strip_prefix("unix:")
                    .and_then(|rest| parse_option_list(rest).remove(""));
                match path {
                    Some(p) => c.qmp_sockets.push(PathBuf::from(p)),
                    None => c.other_qmp.push(value.clone()),
                }
            }
            "chardev" if map.get("").map(String::as_str) == Some("socket") => {
                if let (Some(id), Some(path)) = (map.get("id"), map.get("path")) {
                    chardevs.insert(id.clone(), path.clone());
                }
            }
            "mon" => monitors.push(map),
            "mem-path" => c.hugepages = true,
            "object" => {
                let is_file = map.get("qom-type").or(map.get("")).map(String::as_str)
                    == Some("memory-backend-file");
                if is_file && map.get("mem-path").is_some_and(|p| p.contains("huge")) {
                    c.hugepages = true;
                }
            }
            "overcommit" => c.mem_locked |= on(map.get("mem-lock")).unwrap_or(false),
            "realtime" => c.mem_locked |= on(map.get("mlock")).unwrap_or(false),
            _ => {}
        }
    }
    for m in monitors {
        let control = m.get("mode").map(String::as_str) == Some("control");
        if let Some(path) = m.get("chardev").and_then(|id| chardevs.get(id)) {
            if control {
                c.qmp_sockets.push(PathBuf::from(path));
            }
        }
    }
    for d in devices {
        let driver = d.get("driver").or(d.get("")).map(String::as_str);
        if driver == Some("virtserialport")
            && d.get("name").map(String::as_str) == Some(crate::domain::CLOCK_PORT)
        {
            c.clock_socket = d
                .get("chardev")
                .and_then(|id| chardevs.get(id))
                .map(PathBuf::from);
        }
        let Some(netdev) = d.get("netdev") else {
            continue;
        };
        if let Some(nic) = c.nics.iter_mut().find(|n| &n.id == netdev) {
            nic.model = d.get("driver").or(d.get("")).cloned();
            nic.mac = d.get("mac").cloned();
        }
    }
    c
}

fn nic_of(map: &OptionMap, backend: Option<&String>) -> CmdlineNic {
    CmdlineNic {
        id: map.get("id").cloned().unwrap_or_default(),
        backend: backend.cloned().unwrap_or_default(),
        ifname: map.get("ifname").cloned(),
        vhost: on(map.get("vhost")),
        queues: map.get("queues").and_then(|q| q.parse().ok()),
        model: None,
        mac: None,
    }
}

impl QemuCmdline {
    /// The accelerator QEMU tries first (`tcg` when none is named).
    pub fn first_accel(&self) -> &str {
        self.accels.first().map(String::as_str).unwrap_or("tcg")
    }
}

/// Whether `argv[0]` is a QEMU system emulator.
pub fn is_qemu(argv0: &str) -> bool {
    let base = argv0.rsplit('/').next().unwrap_or(argv0);
    base.starts_with("qemu-system-") || base == "qemu-kvm"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn the_labs_guest_command_line_reads_into_its_name_nic_and_threads() {
        let a = argv(&[
            "qemu-system-x86_64",
            "-accel",
            "kvm",
            "-cpu",
            "host",
            "-m",
            "512",
            "-netdev",
            "tap,id=n0,ifname=tap0,script=no,downscript=no,vhost=off",
            "-device",
            "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56",
            "-name",
            "hoptrace-demo,debug-threads=on",
            "-smp",
            "1",
            "-nodefaults",
            "-qmp",
            "unix:/run/q.sock,server=on,wait=off",
            "-device",
            "virtio-serial-pci,id=vser0",
            "-chardev",
            "socket,id=clk0,path=/run/hoptrace/labs/demo/clock.sock,server=on,wait=off",
            "-device",
            "virtserialport,bus=vser0.0,chardev=clk0,name=org.hoptrace.clock",
        ]);
        let c = parse(&a);
        assert_eq!(
            c.clock_socket,
            Some(PathBuf::from("/run/hoptrace/labs/demo/clock.sock"))
        );
        assert_eq!(c.name.as_deref(), Some("hoptrace-demo"));
        assert!(c.debug_threads);
        assert_eq!(c.first_accel(), "kvm");
        assert_eq!(c.vcpus, 1);
        assert_eq!(
            c.nics,
            vec![CmdlineNic {
                id: "n0".into(),
                backend: "tap".into(),
                ifname: Some("tap0".into()),
                vhost: Some(false),
                queues: None,
                model: Some("virtio-net-pci".into()),
                mac: Some("52:54:00:12:34:56".into()),
            }]
        );
        assert_eq!(c.qmp_sockets, vec![PathBuf::from("/run/q.sock")]);
    }

    #[test]
    fn libvirt_style_json_options_and_a_control_monitor_read_like_key_value_lists() {
        let a = argv(&[
            "/usr/bin/qemu-system-x86_64",
            "-name",
            "guest=relay1,debug-threads=on",
            "-machine",
            "pc-q35-8.2,usb=off,accel=kvm",
            "-smp",
            "4,sockets=4,cores=1,threads=1",
            "-overcommit",
            "mem-lock=on",
            "-object",
            r#"{"qom-type":"memory-backend-file","id":"pc.ram","mem-path":"/dev/hugepages/libvirt/qemu/1-relay1","prealloc":true}"#,
            "-chardev",
            "socket,id=charmonitor,fd=27,server=on,wait=off",
            "-chardev",
            "socket,id=qmp2,path=/tmp/a,,b.sock,server=on",
            "-mon",
            "chardev=qmp2,id=m2,mode=control",
            "-netdev",
            r#"{"type":"tap","fd":"30","vhost":true,"vhostfd":"32","id":"hostnet0"}"#,
            "-device",
            r#"{"driver":"virtio-net-pci","netdev":"hostnet0","id":"net0","mac":"52:54:00:aa:bb:cc"}"#,
        ]);
        let c = parse(&a);
        assert_eq!(c.name.as_deref(), Some("relay1"));
        assert_eq!(c.accels, vec!["kvm".to_string()]);
        assert_eq!(c.vcpus, 4);
        assert!(c.hugepages && c.mem_locked);
        assert_eq!(c.qmp_sockets, vec![PathBuf::from("/tmp/a,b.sock")]);
        assert_eq!(c.nics.len(), 1);
        let n = &c.nics[0];
        assert_eq!(
            (n.backend.as_str(), n.ifname.as_deref(), n.vhost),
            ("tap", None, Some(true))
        );
        assert_eq!(n.model.as_deref(), Some("virtio-net-pci"));
        assert_eq!(n.mac.as_deref(), Some("52:54:00:aa:bb:cc"));
    }

    #[test]
    fn a_bare_command_line_is_one_tcg_vcpu_without_a_name_or_nic() {
        let c = parse(&argv(&["qemu-system-aarch64", "-nographic", "-S"]));
        assert_eq!(c.name, None);
        assert_eq!((c.first_accel(), c.vcpus), ("tcg", 1));
        assert!(c.nics.is_empty() && c.qmp_sockets.is_empty() && c.clock_socket.is_none());
        assert!(is_qemu("/usr/bin/qemu-system-x86_64") && is_qemu("qemu-kvm"));
        assert!(!is_qemu("/usr/bin/qemu-img") && !is_qemu("bash"));
    }

    #[test]
    fn a_nic_option_and_a_tcp_qmp_are_read_and_the_tcp_one_is_kept_aside() {
        let c = parse(&argv(&[
            "qemu-system-x86_64",
            "-nic",
            "tap,ifname=vnet7,model=e1000,mac=52:54:00:00:00:07",
            "-qmp",
            "tcp:127.0.0.1:4444,server,nowait",
            "-name",
            "plain",
        ]));
        assert_eq!(c.name.as_deref(), Some("plain"));
        assert!(!c.debug_threads);
        assert_eq!(c.nics[0].ifname.as_deref(), Some("vnet7"));
        assert_eq!(c.nics[0].model.as_deref(), Some("e1000"));
        assert!(c.qmp_sockets.is_empty());
        assert_eq!(c.other_qmp, vec!["tcp:127.0.0.1:4444,server,nowait"]);
    }
}
