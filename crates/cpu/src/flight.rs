//! Loading the flight recorder and reading it back around a late packet.
//!
//! Load: the object is opened, `flight` sized to (possible CPUs) x (1 <<
//! slots_log2) slots, the clock chosen (TAI like the hop tracer, else
//! MONOTONIC when this kernel has no `bpf_ktime_get_tai_ns`: the load is
//! retried), and the programs of the catalogue's events attached; optional
//! events this kernel lacks are left out and named in [`Recorder::notes`].
//!
//! Read: `flight` is mapped read-only into this process once. To read CPU c
//! around [from, now], its event number `n` (the `heads` map) tells where the
//! newest record is; the slot of event i is `i mod slots` in c's part. Slots
//! hold events in time order within a lap (an interrupt can slip in between
//! another program's timestamp and its slot, so the order is only nearly
//! sorted: the window is sorted after the copy). A binary search on the
//! slots' times finds the first event before `from`; every slot from there to
//! the newest is copied, and kept only when its `seq` is `i + 1` both before
//! and after the copy (else it was overwritten by a newer lap meanwhile, or
//! is being written). When the search meets a slot of a newer lap at the
//! ring's oldest end, the ring no longer reaches back to `from`: the window
//! says so (`reached_back` false) and the time before its first event is
//! unattributed.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{fence, Ordering};

use anyhow::{bail, Context, Result};
use hoptrace_kernel_abi::percpu;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject};

use crate::abi::types::{cpu_event, task_info};
use crate::catalogue::{CpuEventSpec, CPU_EVENTS};
use crate::event::{CpuEvent, RawEvent};
use crate::names::TaskName;
use crate::skel::{CpuSkel, CpuSkelBuilder};

/// Default ring size per CPU: 1 << 18 records of 48 bytes (12 MiB per CPU).
pub const DEFAULT_SLOTS_LOG2: u32 = 18;

/// enum cpu_counter of cpu_abi.h, in order.
pub const COUNTERS: [&str; 2] = ["no_slot_for_cpu", "task_table_full"];

/// How the recorder is set up.
#[derive(Debug, Clone, Copy)]
pub struct RecorderOptions {
    /// Stamp with TAI (the hop tracer's clock when it has it).
    pub tai: bool,
    pub slots_log2: u32,
}

/// The events of one CPU around a time.
#[derive(Debug, Clone, Default)]
pub struct Window {
    pub cpu: u32,
    /// In time order.
    pub events: Vec<CpuEvent>,
    /// The first event is before the `from` asked for: the ring reached back.
    pub reached_back: bool,
    /// Slots skipped: rewritten while read, or of a kind this build does not know.
    pub skipped: u64,
}

/// The flight recorder, attached.
pub struct Recorder<'o> {
    skel: CpuSkel<'o>,
    _links: Vec<Link>,
    base: *const u8,
    len: usize,
    ncpus: u32,
    slots_log2: u32,
    pub tai: bool,
    /// Events attached, as `category:event`.
    pub attached: Vec<String>,
    /// Optional events left out, and why.
    pub notes: Vec<String>,
}

/// Whether the kernel has an event: its `btf_trace_<event>` type in the
/// kernel's BTF (what a `tp_btf` program attaches to). The BTF is read once,
/// for every question the returned function answers.
pub fn event_presence() -> impl Fn(&CpuEventSpec) -> bool {
    let btf = kernel_btf();
    move |spec| present_in(&btf, spec)
}

fn kernel_btf() -> Option<libbpf_rs::btf::Btf<'static>> {
    libbpf_rs::btf::Btf::from_vmlinux().ok()
}

fn present_in(btf: &Option<libbpf_rs::btf::Btf<'static>>, spec: &CpuEventSpec) -> bool {
    // Module tracepoints (kvm) are typed in the module's own BTF: present
    // when the module is loaded with its BTF (libbpf finds the type there)
    // and names the event's `btf_trace_` type (the nested events differ
    // between kernels: kvm_nested_vmrun became kvm_nested_vmenter).
    if spec.category == "kvm" {
        return btf.is_some()
            && std::fs::read("/sys/kernel/btf/kvm")
                .is_ok_and(|b| names_type(&b, &format!("btf_trace_{}", spec.event)));
    }
    btf.as_ref().is_some_and(|b| {
        b.type_by_name::<libbpf_rs::btf::types::Typedef<'_>>(&format!("btf_trace_{}", spec.event))
            .is_some()
    })
}

/// Whether BTF bytes hold the type name `name` in their string section
/// (names there are NUL-separated).
fn names_type(btf: &[u8], name: &str) -> bool {
    let needle = [&[0u8][..], name.as_bytes(), &[0u8][..]].concat();
    btf.windows(needle.len()).any(|w| w == needle)
}

fn open_load<'o>(
    storage: &'o mut MaybeUninit<OpenObject>,
    opts: RecorderOptions,
    ncpus: u32,
    programs: &[&str],
) -> Result<CpuSkel<'o>> {
    if std::env::var_os("HOPTRACE_BPF_DEBUG").is_none() {
        libbpf_rs::set_print(None);
    }
    let mut open = CpuSkelBuilder::default()
        .open(storage)
        .context("opening the flight recorder's BPF object")?;
    if let Some(ro) = open.maps.rodata_data.as_mut() {
        ro.cpu_config.use_tai = opts.tai as u32;
        ro.cpu_config.slots_log2 = opts.slots_log2;
        ro.cpu_config.ncpus = ncpus;
    }
    open.maps
        .flight
        .set_max_entries(ncpus << opts.slots_log2)
        .context("sizing the flight ring")?;
    for mut p in open.open_object_mut().progs_mut() {
        let name = p.name().to_string_lossy().into_owned();
        p.set_autoload(programs.contains(&name.as_str()));
    }
    Ok(open.load()?)
}

impl<'o> Recorder<'o> {
    /// Load and attach. Fails with what to do when a required event is
    /// missing or the kernel refuses the programs.
    pub fn start(storage: &'o mut MaybeUninit<OpenObject>, opts: RecorderOptions) -> Result<Self> {
        if !(10..=22).contains(&opts.slots_log2) {
            bail!(
                "flight ring of 2^{} slots per CPU: use 2^10 to 2^22",
                opts.slots_log2
            );
        }
        let ncpus = libbpf_rs::num_possible_cpus().context("counting the possible CPUs")? as u32;
        let btf = kernel_btf();
        if btf.is_none() {
            bail!("--explain needs the kernel's BTF (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF) to attach its tp_btf programs");
        }
        let mut programs = Vec::new();
        let mut attached = Vec::new();
        let mut notes = Vec::new();
        for spec in CPU_EVENTS {
            if present_in(&btf, spec) {
                programs.push(spec.program);
                attached.push(spec.tracepoint());
            } else if spec.required {
                bail!(
                    "this kernel has no {} tracepoint, which --explain needs ({}); without it no late packet can be explained",
                    spec.tracepoint(),
                    spec.meaning
                );
            } else {
                notes.push(format!(
                    "no {} on this kernel: not recorded",
                    spec.tracepoint()
                ));
            }
        }
        // TAI first when asked (the hop tracer's clock); MONOTONIC when this
        // kernel has no bpf_ktime_get_tai_ns. The kvm programs read the
        // vendor module's structures: if they are what the kernel refuses,
        // the recorder runs without them (noted). Probe loads are dropped
        // with their skeleton, so the storage can be reused.
        let loads = |programs: &[&str], tai: bool| {
            let mut probe = MaybeUninit::uninit();
            let ok =
                open_load(&mut probe, RecorderOptions { tai, ..opts }, ncpus, programs).is_ok();
            ok
        };
        let mut tai = opts.tai && loads(&programs, true);
        // The programs that read the vendor module's structures, the nested
        // events first (their arguments differ most between kernels): a
        // kernel that refuses them runs the recorder without them, noted.
        for (prefix, note) in [
            (
                "kvm_nested",
                "kvm:kvm_nested_* did not load on this kernel: nested handling is not a part",
            ),
            (
                "kvm_",
                "kvm:kvm_exit/kvm_entry did not load on this kernel: VM exits are not parts",
            ),
        ] {
            if tai || loads(&programs, false) || !programs.iter().any(|p| p.starts_with(prefix)) {
                continue;
            }
            let without: Vec<&str> = programs
                .iter()
                .copied()
                .filter(|p| !p.starts_with(prefix))
                .collect();
            if loads(&without, false) {
                notes.push(note.into());
                attached.retain(|a| !a.starts_with(&format!("kvm:{prefix}")));
                programs = without;
                tai = opts.tai && loads(&programs, true);
            }
        }
        let opts = RecorderOptions { tai, ..opts };
        let skel = open_load(storage, opts, ncpus, &programs).context(
            "loading the flight recorder (tp_btf programs: the kernel needs BTF, /sys/kernel/btf/vmlinux)",
        )?;
        let mut links = Vec::new();
        for prog in skel.object().progs_mut() {
            if !programs.contains(&prog.name().to_string_lossy().as_ref()) {
                continue;
            }
            let name = prog.name().to_string_lossy().into_owned();
            links.push(prog.attach().with_context(|| format!("attaching {name}"))?);
        }
        let len = ((ncpus as usize) << opts.slots_log2) * std::mem::size_of::<cpu_event>();
        let fd = skel.maps.flight.as_fd().as_raw_fd();
        // SAFETY: a read-only shared mapping of the BPF_F_MMAPABLE array's
        // values, `len` bytes (its max_entries x value size); unmapped in Drop.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            bail!(
                "mapping the flight ring: {}",
                std::io::Error::last_os_error()
            );
        }
        Ok(Recorder {
            skel,
            _links: links,
            base: base as *const u8,
            len,
            ncpus,
            slots_log2: opts.slots_log2,
            tai,
            attached,
            notes,
        })
    }

    pub fn ncpus(&self) -> u32 {
        self.ncpus
    }

    /// The kernel ids of the attached programs (for `bpftool prog` and the
    /// kernel's BPF statistics).
    pub fn prog_ids(&self) -> Vec<u32> {
        self.skel
            .object()
            .progs()
            .filter(|p| p.autoload())
            .map(|p| {
                let mut info: libbpf_rs::libbpf_sys::bpf_prog_info =
                    // SAFETY: a plain C struct; zero is a valid value.
                    unsafe { std::mem::zeroed() };
                let mut len = std::mem::size_of_val(&info) as u32;
                // SAFETY: the kernel fills at most `len` bytes of `info`.
                let rc = unsafe {
                    libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(
                        p.as_fd().as_raw_fd(),
                        &mut info,
                        &mut len,
                    )
                };
                if rc == 0 {
                    info.id
                } else {
                    0
                }
            })
            .filter(|&id| id != 0)
            .collect()
    }

    /// Events recorded per CPU so far.
    pub fn heads(&self) -> Vec<u64> {
        percpu::values::<u64>(&self.skel.maps.heads, 0).unwrap_or_default()
    }

    /// COUNTERS order, summed over the CPUs.
    pub fn counters(&self) -> [u64; 2] {
        let mut out = [0u64; 2];
        for (i, c) in out.iter_mut().enumerate() {
            *c = percpu::values::<u64>(&self.skel.maps.counters, i as u32)
                .unwrap_or_default()
                .iter()
                .sum();
        }
        out
    }

    /// Who `pid` is, as last switched in.
    pub fn task(&self, pid: u32) -> Option<TaskName> {
        let v = self
            .skel
            .maps
            .tasks
            .lookup(&pid.to_ne_bytes(), MapFlags::ANY)
            .ok()??;
        let task_info {
            comm,
            tgid,
            policy,
            rt_priority,
            prio: _,
        } = hoptrace_kernel_abi::from_bytes::<task_info>(&v)?;
        let comm = hoptrace_kernel_abi::c_string(&comm);
        let command = std::fs::read(format!("/proc/{tgid}/cmdline"))
            .ok()
            .and_then(|c| crate::names::subcommand(&comm, &c));
        Some(TaskName {
            comm,
            policy,
            rt_priority,
            command,
        })
    }

    /// Copy slot `i` (event number) of `cpu` when it holds that event.
    fn slot(&self, cpu: u32, i: u64) -> Option<RawEvent> {
        let mask = (1u64 << self.slots_log2) - 1;
        let idx = ((cpu as u64) << self.slots_log2) | (i & mask);
        let off = idx as usize * std::mem::size_of::<cpu_event>();
        if off + std::mem::size_of::<cpu_event>() > self.len {
            return None;
        }
        // SAFETY: `off` is inside the mapping; the BPF side writes these
        // bytes concurrently, hence volatile reads and the seq check around
        // the copy (a torn copy is detected and dropped).
        unsafe {
            let p = self.base.add(off) as *const cpu_event;
            let seq0 = std::ptr::read_volatile(&(*p).seq);
            fence(Ordering::Acquire);
            let e = std::ptr::read_volatile(p);
            fence(Ordering::Acquire);
            let seq1 = std::ptr::read_volatile(&(*p).seq);
            (seq0 == i + 1 && seq1 == i + 1).then_some(RawEvent {
                ts: e.ts,
                steal: e.steal,
                kind: e.kind,
                a: e.a,
                b: e.b,
                c: e.c,
                d: e.d,
                e: e.e,
            })
        }
    }

    /// Every CPU's window from `from_ns` on (the event counters read once).
    pub fn read_all(&self, from_ns: u64) -> Vec<Window> {
        self.read_all_between(from_ns, u64::MAX)
    }

    /// Every CPU's window from `from_ns` to `to_ns`: the events between,
    /// the last one before and the first ones after `to_ns` (see
    /// [`READ_PAST_NS`]). Explaining a stage of a second ago reads that
    /// second, not every event recorded since.
    pub fn read_all_between(&self, from_ns: u64, to_ns: u64) -> Vec<Window> {
        let all: Vec<u32> = (0..self.ncpus).collect();
        self.read_cpus_between(&all, from_ns, to_ns)
    }

    /// The windows of `cpus` only, from `from_ns` on (a CPU the recorder
    /// does not have gives none).
    pub fn read_cpus(&self, cpus: &[u32], from_ns: u64) -> Vec<Window> {
        self.read_cpus_between(cpus, from_ns, u64::MAX)
    }

    fn read_cpus_between(&self, cpus: &[u32], from_ns: u64, to_ns: u64) -> Vec<Window> {
        let heads = self.heads();
        cpus.iter()
            .filter(|&&c| c < self.ncpus)
            .map(|&c| self.read(c, heads.get(c as usize).copied(), from_ns, to_ns))
            .collect()
    }

    /// The events of `cpu` from the last one before `from_ns` to the first
    /// more than [`READ_PAST_NS`] after `to_ns` (or the newest); `head` is
    /// its event count (none: nothing recorded).
    fn read(&self, cpu: u32, head: Option<u64>, from_ns: u64, to_ns: u64) -> Window {
        let mut w = Window {
            cpu,
            ..Default::default()
        };
        let Some(n) = head else {
            return w;
        };
        let slots = 1u64 << self.slots_log2;
        let oldest = n.saturating_sub(slots);
        // First event number whose slot is valid and at or after from_ns:
        // slots that are invalid (a newer lap) count as "after".
        let (mut lo, mut hi) = (oldest, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.slot(cpu, mid) {
                Some(r) if r.ts < from_ns => lo = mid + 1,
                _ => hi = mid,
            }
        }
        // One event before from_ns (the state and steal before the window).
        let first = if lo > oldest { lo - 1 } else { lo };
        let stop_after = to_ns.saturating_add(READ_PAST_NS);
        for i in first..n {
            match self.slot(cpu, i).map(CpuEvent::try_from) {
                Some(Ok(e)) => {
                    let past = e.ts > stop_after;
                    w.events.push(e);
                    if past {
                        break;
                    }
                }
                _ => w.skipped += 1,
            }
        }
        w.reached_back = w.events.first().is_some_and(|e| e.ts < from_ns);
        w.events.sort_by_key(|e| e.ts);
        w
    }
}

/// How far past the end of a bounded read events are still read: a CPU's
/// events reach its ring in time order up to the few microseconds a
/// tracepoint takes, and the first event after the end closes the context
/// open at the end (its steal included).
pub const READ_PAST_NS: u64 = 1_000_000;

impl Drop for Recorder<'_> {
    fn drop(&mut self) {
        // SAFETY: the mapping made in start(), of `len` bytes.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::names_type;

    #[test]
    fn a_module_btf_names_an_event_only_by_its_whole_type_name() {
        let strings = b"\0btf_trace_kvm_exit\0btf_trace_kvm_nested_vmenter\0kvm_nested_vmrun_x\0";
        assert!(names_type(strings, "btf_trace_kvm_exit"));
        assert!(names_type(strings, "btf_trace_kvm_nested_vmenter"));
        assert!(!names_type(strings, "btf_trace_kvm_nested_vmrun"));
        assert!(!names_type(strings, "btf_trace_kvm_nested"));
    }
}
