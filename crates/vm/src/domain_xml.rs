//! Reading a libvirt domain XML (untrusted bytes: a file, `virsh dumpxml`)
//! into a [`Domain`].
//!
//! 1. The bytes must be UTF-8 and well-formed XML ([`roxmltree`]: no DTD,
//!    at most [`NODES_LIMIT`] nodes), else [`DomainError::NotXml`] with the
//!    line and column.
//! 2. The root element must be `<domain>` (libvirt's format has no
//!    namespace on it), else [`DomainError::NotDomain`] naming what it is.
//! 3. The elements the model holds are read where libvirt's format puts
//!    them (`/domain/cputune/vcpupin`, `/domain/devices/interface`, ...);
//!    an attribute the model needs that does not read (a vCPU index that
//!    is not a number, a CPU set libvirt would refuse) is
//!    [`DomainError::Invalid`] naming the element and its line. Unknown
//!    elements and attributes are ignored.

use roxmltree::{Document, Node};

use crate::cpuset::Cpus;
use crate::domain::*;

/// Most nodes a domain XML may have (a large live domain has a few thousand).
pub const NODES_LIMIT: u32 = 200_000;

/// Why bytes are not a domain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    #[error("not XML: line {line}, column {column}: {message}")]
    NotXml {
        line: u32,
        column: u32,
        message: String,
    },
    #[error("not a libvirt domain: the root element is <{found}>, expected <domain> (virsh dumpxml NAME writes one)")]
    NotDomain { found: String },
    #[error("line {line}: <{element}>: {message}")]
    Invalid {
        line: u32,
        element: String,
        message: String,
    },
}

/// Reads a domain from the bytes of its XML.
pub fn parse(bytes: &[u8]) -> Result<Domain, DomainError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let before = &bytes[..e.valid_up_to()];
        let line = before.iter().filter(|b| **b == b'\n').count() as u32 + 1;
        let column = (before.len()
            - before
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |p| p + 1)) as u32
            + 1;
        DomainError::NotXml {
            line,
            column,
            message: "not UTF-8 text".into(),
        }
    })?;
    let options = roxmltree::ParsingOptions {
        allow_dtd: false,
        nodes_limit: NODES_LIMIT,
        ..Default::default()
    };
    let doc = Document::parse_with_options(text, options).map_err(|e| {
        let pos = e.pos();
        let message = e.to_string();
        let suffix = format!(" at {pos}");
        DomainError::NotXml {
            line: pos.row,
            column: pos.col,
            message: message.strip_suffix(&suffix).unwrap_or(&message).into(),
        }
    })?;
    let root = doc.root_element();
    if root.tag_name().name() != "domain" || root.tag_name().namespace().is_some() {
        return Err(DomainError::NotDomain {
            found: root.tag_name().name().to_string(),
        });
    }
    Reader { doc: &doc }.domain(root)
}

struct Reader<'d, 'input> {
    doc: &'d Document<'input>,
}

/// The child elements of `n` named `name`.
fn children<'a, 'input>(
    n: Node<'a, 'input>,
    name: &'static str,
) -> impl Iterator<Item = Node<'a, 'input>> {
    n.children()
        .filter(move |c| c.is_element() && c.tag_name().name() == name)
}

fn child<'a, 'input>(n: Node<'a, 'input>, name: &'static str) -> Option<Node<'a, 'input>> {
    children(n, name).next()
}

fn attr(n: Node, name: &str) -> Option<String> {
    n.attribute(name).map(str::to_string)
}

/// The trimmed text of element `n`.
fn text(n: Node) -> String {
    n.text().unwrap_or_default().trim().to_string()
}

/// `on`/`yes` or `off`/`no`.
fn on_off(s: &str) -> Option<bool> {
    match s {
        "on" | "yes" => Some(true),
        "off" | "no" => Some(false),
        _ => None,
    }
}

impl Reader<'_, '_> {
    fn invalid(&self, n: Node, message: impl Into<String>) -> DomainError {
        DomainError::Invalid {
            line: self.doc.text_pos_at(n.range().start).row,
            element: n.tag_name().name().to_string(),
            message: message.into(),
        }
    }

    fn number<T: std::str::FromStr>(&self, n: Node, what: &str, s: &str) -> Result<T, DomainError> {
        s.trim()
            .parse()
            .map_err(|_| self.invalid(n, format!("{what} `{s}` is not a number")))
    }

    /// A required numeric attribute.
    fn id(&self, n: Node, name: &str) -> Result<u32, DomainError> {
        match n.attribute(name) {
            Some(s) => self.number(n, name, s),
            None => Err(self.invalid(n, format!("no `{name}` attribute"))),
        }
    }

    fn cpus(&self, n: Node, name: &str) -> Result<Option<Cpus>, DomainError> {
        n.attribute(name)
            .map(|s| Cpus::parse(s).map_err(|e| self.invalid(n, format!("{name}: {e}"))))
            .transpose()
    }

    fn required_cpus(&self, n: Node, name: &str) -> Result<Cpus, DomainError> {
        self.cpus(n, name)?
            .ok_or_else(|| self.invalid(n, format!("no `{name}` attribute")))
    }

    fn state(&self, n: Node) -> Result<bool, DomainError> {
        match n.attribute("state") {
            None => Ok(true),
            Some(s) => on_off(s)
                .ok_or_else(|| self.invalid(n, format!("state `{s}` is neither on nor off"))),
        }
    }

    fn domain(&self, root: Node) -> Result<Domain, DomainError> {
        let mut d = Domain {
            name: child(root, "name").map(text).unwrap_or_default(),
            hypervisor: attr(root, "type").unwrap_or_default(),
            // libvirt's default when <vcpu> is absent.
            vcpus: 1,
            ..Domain::default()
        };
        if let Some(v) = child(root, "vcpu") {
            d.vcpus = match v.attribute("current") {
                Some(c) => self.number(v, "current", c)?,
                None => self.number(v, "vCPU count", &text(v))?,
            };
            d.vcpu_cpuset = self.cpus(v, "cpuset")?;
        }
        if let Some(io) = child(root, "iothreads") {
            d.iothreads = self.number(io, "iothread count", &text(io))?;
        }
        if let Some(ct) = child(root, "cputune") {
            d.cputune = self.cputune(ct)?;
        }
        if let Some(mb) = child(root, "memoryBacking") {
            d.memory_backing = self.memory_backing(mb);
        }
        if let Some(m) = child(root, "numatune").and_then(|n| child(n, "memory")) {
            d.numatune = Some(NumaMemory {
                mode: attr(m, "mode"),
                nodeset: self.cpus(m, "nodeset")?,
                placement: attr(m, "placement"),
            });
        }
        d.cpu = child(root, "cpu").map(|c| CpuModel {
            mode: attr(c, "mode"),
            model: child(c, "model").map(text).filter(|m| !m.is_empty()),
            features: children(c, "feature")
                .map(|f| CpuFeature {
                    policy: attr(f, "policy").unwrap_or_else(|| "require".into()),
                    name: attr(f, "name").unwrap_or_default(),
                })
                .collect(),
        });
        if let Some(f) = child(root, "features") {
            d.features.pmu = child(f, "pmu").map(|p| self.state(p)).transpose()?;
            d.features.vmport = child(f, "vmport").map(|p| self.state(p)).transpose()?;
        }
        if let Some(clock) = child(root, "clock") {
            for t in children(clock, "timer") {
                let present = match t.attribute("present") {
                    None => None,
                    Some(p) => Some(on_off(p).ok_or_else(|| {
                        self.invalid(t, format!("present `{p}` is neither yes nor no"))
                    })?),
                };
                d.timers.push(Timer {
                    name: attr(t, "name").unwrap_or_default(),
                    present,
                    tickpolicy: attr(t, "tickpolicy"),
                });
            }
        }
        if let Some(dev) = child(root, "devices") {
            d.devices = self.devices(dev)?;
        }
        Ok(d)
    }

    fn sched(&self, n: Node, ids: &str) -> Result<Sched, DomainError> {
        let name = n.attribute("scheduler").unwrap_or_default();
        let scheduler = Scheduler::parse(name).ok_or_else(|| {
            self.invalid(
                n,
                format!("scheduler `{name}` is not one of fifo, rr, batch, idle, other"),
            )
        })?;
        Ok(Sched {
            ids: self.cpus(n, ids)?,
            scheduler,
            priority: n
                .attribute("priority")
                .map(|p| self.number(n, "priority", p))
                .transpose()?,
        })
    }

    fn cputune(&self, ct: Node) -> Result<CpuTune, DomainError> {
        let mut t = CpuTune::default();
        for p in children(ct, "vcpupin") {
            t.vcpupin.push(Pin {
                id: self.id(p, "vcpu")?,
                cpus: self.required_cpus(p, "cpuset")?,
            });
        }
        for p in children(ct, "iothreadpin") {
            t.iothreadpin.push(Pin {
                id: self.id(p, "iothread")?,
                cpus: self.required_cpus(p, "cpuset")?,
            });
        }
        if let Some(p) = child(ct, "emulatorpin") {
            t.emulatorpin = Some(self.required_cpus(p, "cpuset")?);
        }
        for s in children(ct, "vcpusched") {
            t.vcpusched.push(self.sched(s, "vcpus")?);
        }
        for s in children(ct, "iothreadsched") {
            t.iothreadsched.push(self.sched(s, "iothreads")?);
        }
        if let Some(s) = child(ct, "emulatorsched") {
            // It applies to every emulator thread: no id-list attribute.
            t.emulatorsched = Some(self.sched(s, "")?);
        }
        Ok(t)
    }

    fn memory_backing(&self, mb: Node) -> MemoryBacking {
        let hp = child(mb, "hugepages");
        MemoryBacking {
            hugepages: hp.is_some(),
            page_sizes: hp
                .into_iter()
                .flat_map(|h| children(h, "page"))
                .map(|p| {
                    let size = attr(p, "size").unwrap_or_default();
                    match p.attribute("unit") {
                        Some(u) => format!("{size} {u}"),
                        None => format!("{size} KiB"),
                    }
                })
                .collect(),
            locked: child(mb, "locked").is_some(),
        }
    }

    fn interface(&self, n: Node) -> Result<Interface, DomainError> {
        let driver = child(n, "driver");
        let source = child(n, "source");
        Ok(Interface {
            kind: attr(n, "type").unwrap_or_default(),
            mac: child(n, "mac").and_then(|m| attr(m, "address")),
            model: child(n, "model").and_then(|m| attr(m, "type")),
            driver: driver.and_then(|d| attr(d, "name")),
            queues: driver
                .and_then(|d| d.attribute("queues").map(|q| (d, q)))
                .map(|(d, q)| self.number(d, "queues", q))
                .transpose()?,
            target: child(n, "target").and_then(|t| attr(t, "dev")),
            source: source.and_then(|s| {
                attr(s, "bridge")
                    .or_else(|| attr(s, "network"))
                    .or_else(|| attr(s, "dev"))
            }),
            virtualport: child(n, "virtualport").and_then(|v| attr(v, "type")),
        })
    }

    fn devices(&self, dev: Node) -> Result<Devices, DomainError> {
        let mut d = Devices {
            emulator: child(dev, "emulator").map(text),
            memballoon: child(dev, "memballoon").map(|m| attr(m, "model").unwrap_or_default()),
            ..Devices::default()
        };
        for n in dev.children().filter(Node::is_element) {
            match n.tag_name().name() {
                "interface" => d.interfaces.push(self.interface(n)?),
                "hostdev" => d.hostdevs.push(HostDev {
                    kind: attr(n, "type").unwrap_or_default(),
                    address: child(n, "source")
                        .and_then(|s| child(s, "address"))
                        .map(pci_address),
                }),
                "controller" => d.controllers.push(Controller {
                    kind: attr(n, "type").unwrap_or_default(),
                    model: attr(n, "model"),
                }),
                "input" => d.inputs.push(Input {
                    kind: attr(n, "type").unwrap_or_default(),
                    bus: attr(n, "bus"),
                }),
                "disk" => d.disks.push(Disk {
                    device: attr(n, "device").unwrap_or_else(|| "disk".into()),
                    target: child(n, "target").and_then(|t| attr(t, "dev")),
                }),
                "sound" => d.sounds.push(attr(n, "model").unwrap_or_default()),
                "rng" => d.rngs.push(attr(n, "model").unwrap_or_default()),
                "redirdev" => d.redirdevs.push(attr(n, "bus").unwrap_or_default()),
                "channel" => d.channels.push(Channel {
                    kind: attr(n, "type").unwrap_or_default(),
                    path: child(n, "source").and_then(|s| attr(s, "path")),
                    mode: child(n, "source").and_then(|s| attr(s, "mode")),
                    target: child(n, "target").and_then(|t| attr(t, "name")),
                }),
                "watchdog" => d.watchdogs.push(Watchdog {
                    model: attr(n, "model").unwrap_or_default(),
                    action: attr(n, "action"),
                }),
                _ => {}
            }
        }
        Ok(d)
    }
}

/// `<address domain= bus= slot= function=>` as `0000:09:00.0`.
fn pci_address(a: Node) -> String {
    let hex = |name: &str| {
        a.attribute(name)
            .map(|v| v.trim_start_matches("0x").to_string())
            .unwrap_or_else(|| "0".into())
    };
    format!(
        "{:0>4}:{:0>2}:{:0>2}.{}",
        hex("domain"),
        hex("bus"),
        hex("slot"),
        hex("function")
    )
}
