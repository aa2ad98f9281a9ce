//! What the checks share: the audited root, the [`Kernel`] seam, the
//! options, the two samples of the measured counters, and facts several
//! checks need (command line, CPUs, isolated CPUs, kernel configuration,
//! process table, the path), each read once on first use.
//!
//! The *RT CPUs* are the CPUs set aside for real-time work: those the
//! scheduler isolates (`/sys/devices/system/cpu/isolated`, plus a cgroup v2
//! isolated partition's `cpuset.cpus.isolated`) and the `nohz_full` ones.
//! The *housekeeping CPUs* are the other online CPUs. When the sysfs files
//! are missing (an old kernel, or an image without them) the command line
//! is read instead, as the kernel would read it.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::cmdline::Cmdline;
use crate::cpulist::{CpuSet, IsolcpusSpec};
use crate::kconfig::KConfig;
use crate::kernel::Kernel;
use crate::path::PathModel;
use crate::procfs::{parse_stat, processes, CpuTimes, Interrupts, Process};
use crate::root::{Root, Unreadable};

/// What to audit.
#[derive(Debug, Clone)]
pub struct Options {
    /// Time between the two samples of `/proc/interrupts` and `/proc/stat`.
    pub interval: Duration,
    /// Interfaces on the packet's path (path checks).
    pub ifaces: Vec<String>,
    /// Named network namespace of the interfaces.
    pub netns: Option<String>,
    /// Processes on the path: QEMU (vCPU and vhost threads) or a subscriber.
    pub pids: Vec<u32>,
    /// A libvirt domain to audit (the domain checks).
    pub domain: Option<DomainInput>,
    /// The host's RT CPUs as declared (`--isolated`), instead of those the
    /// audited root isolates: a domain template is audited for the host it
    /// is meant for.
    pub isolated: Option<CpuSet>,
    /// `--observe`: what ran on the watched CPUs while they were watched
    /// (the flight recorder's account, hoptrace_cpu::observe).
    pub observed: Option<Observation>,
}

/// What `--observe` saw.
#[derive(Debug, Clone)]
pub struct Observation {
    /// The CPUs watched, as declared (`--isolated`) or as the host isolates them.
    pub cpus: CpuSet,
    pub duration_ns: u64,
    pub per_cpu: Vec<hoptrace_cpu::observe::ObservedCpu>,
}

/// The domain the domain checks audit, and where it came from.
#[derive(Debug, Clone)]
pub struct DomainInput {
    /// The file (or `virsh dumpxml NAME`) it was read from.
    pub source: String,
    pub domain: hoptrace_vm::Domain,
    /// The domain as it runs (`--vm NAME`): its threads as the kernel
    /// reports them, for the live checks; `None` for a file.
    pub running: Option<hoptrace_vm::ResolvedVm>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            interval: Duration::from_secs(1),
            ifaces: Vec::new(),
            netns: None,
            pids: Vec::new(),
            domain: None,
            isolated: None,
            observed: None,
        }
    }
}

impl Options {
    /// Whether the path checks run.
    pub fn has_path(&self) -> bool {
        !self.ifaces.is_empty() || !self.pids.is_empty()
    }
}

/// `/proc/interrupts` and `/proc/stat`, before and after the interval.
#[derive(Debug, Clone)]
pub struct Samples {
    pub interval: Duration,
    pub interrupts: Result<(Interrupts, Interrupts), Unreadable>,
    pub stat: Result<(StatSample, StatSample), Unreadable>,
    /// `/proc/stat` read at [`STAT_STEPS`] even steps over the interval
    /// (first and last are the `stat` pair): how steady a rate was, not
    /// only its mean. Empty when `/proc/stat` could not be read.
    pub stat_steps: Vec<StatSample>,
}

/// Steps the interval is divided into for [`Samples::stat_steps`].
pub const STAT_STEPS: u32 = 10;

/// Per-CPU times (`None` = all CPUs).
pub type StatSample = BTreeMap<Option<u32>, CpuTimes>;

impl Samples {
    /// Nothing sampled: the domain audit measures nothing.
    pub fn none() -> Samples {
        let none = || Unreadable::new("/proc", "not sampled: a domain audit measures nothing");
        Samples {
            interval: Duration::ZERO,
            interrupts: Err(none()),
            stat: Err(none()),
            stat_steps: Vec::new(),
        }
    }

    /// Read both files, let the interval pass ([`Kernel::wait`], in
    /// [`STAT_STEPS`] steps with `/proc/stat` read after each), read again.
    pub fn take(root: &Root, kernel: &dyn Kernel, interval: Duration) -> Samples {
        let irq = || -> Result<Interrupts, Unreadable> {
            let t = root.read("/proc/interrupts")?;
            Interrupts::parse(&t).map_err(|e| Unreadable::new("/proc/interrupts", e))
        };
        let stat = || -> Result<StatSample, Unreadable> {
            let s = parse_stat(&root.read("/proc/stat")?);
            if s.is_empty() {
                return Err(Unreadable::new("/proc/stat", "no cpu lines"));
            }
            Ok(s)
        };
        let (i0, s0) = (irq(), stat());
        let mut steps: Vec<StatSample> = s0.iter().cloned().collect();
        for _ in 1..STAT_STEPS {
            kernel.wait(interval / STAT_STEPS);
            if let (Ok(s), false) = (stat(), steps.is_empty()) {
                steps.push(s);
            }
        }
        kernel.wait(interval / STAT_STEPS);
        let (i1, s1) = (irq(), stat());
        if let (Ok(s), false) = (&s1, steps.is_empty()) {
            steps.push(s.clone());
        }
        Samples {
            interval,
            interrupts: i0.and_then(|a| i1.map(|b| (a, b))),
            stat: s0.and_then(|a| s1.map(|b| (a, b))),
            stat_steps: steps,
        }
    }

    /// Whether the counters moved: a mounted image's files never change,
    /// so no delta measured on them means anything.
    pub fn live(&self) -> Result<(), String> {
        match &self.stat {
            Ok((a, b)) if a != b => Ok(()),
            Ok(_) => Err(format!(
                "/proc/stat did not change in {:.1} s: not a live /proc (a mounted image?), nothing was measured",
                self.interval.as_secs_f64()
            )),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// The CPUs set aside for real-time work, and where that was read.
#[derive(Debug, Clone)]
pub struct Isolation {
    /// Scheduler-isolated CPUs (isolcpus domain, cgroup isolated partitions).
    pub domain: CpuSet,
    /// `nohz_full` CPUs.
    pub nohz_full: CpuSet,
    /// `domain` and `nohz_full` together: the RT CPUs.
    pub rt: CpuSet,
    /// `isolcpus=` as the kernel reads it, if on the command line.
    pub isolcpus: Option<IsolcpusSpec>,
    /// Which files or parameters gave the sets.
    pub sources: Vec<String>,
}

/// Everything a check may look at.
pub struct Ctx<'a> {
    pub root: &'a Root,
    pub kernel: &'a dyn Kernel,
    pub opts: &'a Options,
    pub samples: Samples,
    cmdline: OnceCell<Result<Cmdline, Unreadable>>,
    online: OnceCell<Result<CpuSet, Unreadable>>,
    isolation: OnceCell<Result<Isolation, Unreadable>>,
    kconfig: OnceCell<Result<KConfig, Unreadable>>,
    processes: OnceCell<Result<Vec<Process>, Unreadable>>,
    path: OnceCell<PathModel>,
}

impl<'a> Ctx<'a> {
    pub fn new(
        root: &'a Root,
        kernel: &'a dyn Kernel,
        opts: &'a Options,
        samples: Samples,
    ) -> Self {
        Ctx {
            root,
            kernel,
            opts,
            samples,
            cmdline: OnceCell::new(),
            online: OnceCell::new(),
            isolation: OnceCell::new(),
            kconfig: OnceCell::new(),
            processes: OnceCell::new(),
            path: OnceCell::new(),
        }
    }

    pub fn cmdline(&self) -> Result<&Cmdline, Unreadable> {
        self.cmdline
            .get_or_init(|| self.root.read("/proc/cmdline").map(|s| Cmdline::parse(&s)))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// `nr_cpu_ids`: one more than the last possible CPU (gives `N` its value).
    pub fn nr_cpu_ids(&self) -> Option<u32> {
        let s = self.root.read("/sys/devices/system/cpu/possible").ok()?;
        let set = CpuSet::parse_list(&s, None).ok()?;
        set.iter().last().map(|n| n + 1)
    }

    pub fn online(&self) -> Result<&CpuSet, Unreadable> {
        self.online
            .get_or_init(|| {
                let p = "/sys/devices/system/cpu/online";
                let s = self.root.read(p)?;
                CpuSet::parse_list(&s, None).map_err(|e| Unreadable::new(p, e.to_string()))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    pub fn isolation(&self) -> Result<&Isolation, Unreadable> {
        self.isolation
            .get_or_init(|| self.read_isolation())
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The host's RT CPUs for the domain checks: `--isolated` when given,
    /// else the audited root's, with where they came from.
    pub fn host_rt_cpus(&self) -> Result<(CpuSet, String), Unreadable> {
        if let Some(set) = &self.opts.isolated {
            return Ok((set.clone(), format!("--isolated {set}")));
        }
        let iso = self.isolation()?;
        let from = if iso.sources.is_empty() {
            "this host isolates none".to_string()
        } else {
            iso.sources.join(", ")
        };
        Ok((iso.rt.clone(), from))
    }

    /// Online CPUs that are not RT CPUs.
    pub fn housekeeping(&self) -> Result<CpuSet, Unreadable> {
        Ok(self.online()?.difference(&self.isolation()?.rt))
    }

    pub fn kconfig(&self) -> Result<&KConfig, Unreadable> {
        self.kconfig
            .get_or_init(|| KConfig::read(self.root))
            .as_ref()
            .map_err(Clone::clone)
    }

    pub fn processes(&self) -> Result<&[Process], Unreadable> {
        self.processes
            .get_or_init(|| processes(self.root))
            .as_ref()
            .map(Vec::as_slice)
            .map_err(Clone::clone)
    }

    /// Processes whose name is `comm`.
    pub fn processes_named(&self, comm: &str) -> Result<Vec<&Process>, Unreadable> {
        Ok(self
            .processes()?
            .iter()
            .filter(|p| p.comm == comm)
            .collect())
    }

    /// The threads on the packet's path (discovered once).
    pub fn path(&self) -> &PathModel {
        self.path.get_or_init(|| PathModel::discover(self))
    }

    fn read_isolation(&self) -> Result<Isolation, Unreadable> {
        let nr = self.nr_cpu_ids();
        let cmdline = self.cmdline().ok();
        let mut sources = Vec::new();
        let isolcpus = cmdline
            .and_then(|c| c.get("isolcpus"))
            .and_then(|v| IsolcpusSpec::parse(v, nr).ok());
        let list_file = |p: &str| -> Option<CpuSet> {
            let s = self.root.read(p).ok()?;
            let s = s.trim();
            if s == "(null)" {
                return Some(CpuSet::new());
            }
            CpuSet::parse_list(s, nr).ok()
        };
        let domain = match list_file("/sys/devices/system/cpu/isolated") {
            Some(set) => {
                sources.push(format!("/sys/devices/system/cpu/isolated = {set}"));
                set
            }
            None => match &isolcpus {
                Some(spec) if spec.isolates_domain() => {
                    sources.push(format!("isolcpus= on /proc/cmdline = {}", spec.cpus));
                    spec.cpus.clone()
                }
                Some(_) => CpuSet::new(),
                None if cmdline.is_some() => CpuSet::new(),
                None => {
                    return Err(Unreadable::new(
                        "/sys/devices/system/cpu/isolated and /proc/cmdline",
                        "neither is readable",
                    ))
                }
            },
        };
        let mut domain = domain;
        if let Some(set) = list_file("/sys/fs/cgroup/cpuset.cpus.isolated") {
            if !set.is_empty() {
                sources.push(format!("cgroup isolated partitions = {set}"));
            }
            domain = domain.union(&set);
        }
        let nohz_full = match list_file("/sys/devices/system/cpu/nohz_full") {
            Some(set) => {
                sources.push(format!("/sys/devices/system/cpu/nohz_full = {set}"));
                set
            }
            // sysfs there but no nohz_full file: the kernel has no
            // CONFIG_NO_HZ_FULL and ignored any nohz_full= it was given.
            None if self.root.exists("/sys/devices/system/cpu/isolated") => CpuSet::new(),
            None => cmdline
                .and_then(|c| c.get("nohz_full"))
                .and_then(|v| CpuSet::parse_list(v, nr).ok())
                .inspect(|set| sources.push(format!("nohz_full= on /proc/cmdline = {set}")))
                .unwrap_or_default(),
        };
        Ok(Isolation {
            rt: domain.union(&nohz_full),
            domain,
            nohz_full,
            isolcpus,
            sources,
        })
    }
}
