//! Parsers of the `/proc` files the checks read: `/proc/interrupts`,
//! `/proc/stat`, `/proc/PID/task/TID/stat` and `status`, and the process
//! table (names, kernel threads, threads of a process). Pure text in, values
//! out; the reading goes through [`crate::root::Root`].

use std::collections::BTreeMap;
use std::fmt;

use crate::cpulist::CpuSet;
use crate::root::{Root, Unreadable};

/// One row of `/proc/interrupts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrqRow {
    /// `24` for a device IRQ, `LOC`, `RES`, `NMI`... for the others.
    pub key: String,
    /// Count per CPU number (the header's CPUs; offline CPUs have no column).
    pub counts: BTreeMap<u32, u64>,
    /// The rest of the line: chip, hardware IRQ, trigger, action names.
    pub desc: String,
}

impl IrqRow {
    /// A numbered (device) IRQ, as opposed to a per-CPU vector row.
    pub fn is_device(&self) -> bool {
        self.key.bytes().all(|b| b.is_ascii_digit())
    }

    /// The handler names (last field of a device row; `, ` separates shared ones).
    pub fn actions(&self) -> &str {
        let d = self.desc.trim();
        // chip, hwirq and trigger come first, separated by runs of spaces; the
        // action list is what follows the last run of two or more spaces.
        match d.rfind("  ") {
            Some(i) => d[i..].trim(),
            None => d.rsplit(' ').next().unwrap_or(d),
        }
    }
}

/// A parsed `/proc/interrupts`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interrupts {
    pub cpus: Vec<u32>,
    pub rows: Vec<IrqRow>,
}

impl Interrupts {
    pub fn parse(text: &str) -> Result<Interrupts, String> {
        let mut lines = text.lines();
        let header = lines.next().ok_or("empty file")?;
        let cpus: Vec<u32> = header
            .split_whitespace()
            .map(|c| {
                c.strip_prefix("CPU")
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| format!("header `{c}` is not CPUn"))
            })
            .collect::<Result<_, _>>()?;
        let mut rows = Vec::new();
        for line in lines {
            let Some((key, rest)) = line.split_once(':') else {
                continue;
            };
            let mut counts = BTreeMap::new();
            let mut rest = rest.trim_start();
            for &cpu in &cpus {
                let end = rest.find(' ').unwrap_or(rest.len());
                match rest[..end].parse::<u64>() {
                    Ok(v) => {
                        counts.insert(cpu, v);
                        rest = rest[end..].trim_start();
                    }
                    Err(_) => break,
                }
            }
            rows.push(IrqRow {
                key: key.trim().to_string(),
                counts,
                desc: rest.to_string(),
            });
        }
        Ok(Interrupts { cpus, rows })
    }

    pub fn row(&self, key: &str) -> Option<&IrqRow> {
        self.rows.iter().find(|r| r.key == key)
    }

    /// Per-row, per-CPU increase from `before` to `self` (rows and CPUs
    /// present in both; a counter that went down, e.g. after an IRQ was
    /// freed and reused, counts from zero).
    pub fn delta_since(&self, before: &Interrupts) -> Vec<IrqRow> {
        let mut out = Vec::new();
        for r in &self.rows {
            let Some(b) = before.row(&r.key) else {
                continue;
            };
            let counts = r
                .counts
                .iter()
                .filter_map(|(cpu, &now)| {
                    let was = *b.counts.get(cpu)?;
                    Some((*cpu, if now >= was { now - was } else { now }))
                })
                .collect();
            out.push(IrqRow {
                key: r.key.clone(),
                counts,
                desc: r.desc.clone(),
            });
        }
        out
    }
}

/// One `cpu`/`cpuN` line of `/proc/stat`, in USER_HZ ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub busy_and_idle: u64,
    pub steal: u64,
}

/// Per-CPU times of `/proc/stat` (`None` = the `cpu` total line).
pub fn parse_stat(text: &str) -> BTreeMap<Option<u32>, CpuTimes> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let Some(name) = it.next() else { continue };
        let Some(num) = name.strip_prefix("cpu") else {
            continue;
        };
        let cpu = if num.is_empty() {
            None
        } else {
            match num.parse() {
                Ok(n) => Some(n),
                Err(_) => continue,
            }
        };
        // user nice system idle iowait irq softirq steal [guest guest_nice]:
        // guest time is already inside user/nice, so the first 8 are the total.
        let v: Vec<u64> = it.take(8).filter_map(|x| x.parse().ok()).collect();
        if v.len() < 8 {
            continue;
        }
        out.insert(
            cpu,
            CpuTimes {
                busy_and_idle: v.iter().sum(),
                steal: v[7],
            },
        );
    }
    out
}

/// Scheduling class of a thread (`sched_setscheduler` numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Other,
    Fifo,
    RoundRobin,
    Batch,
    Idle,
    Deadline,
    Unknown(u32),
}

impl Policy {
    pub fn from_number(n: u32) -> Policy {
        match n {
            0 => Policy::Other,
            1 => Policy::Fifo,
            2 => Policy::RoundRobin,
            3 => Policy::Batch,
            5 => Policy::Idle,
            6 => Policy::Deadline,
            n => Policy::Unknown(n),
        }
    }

    pub fn is_realtime(self) -> bool {
        matches!(self, Policy::Fifo | Policy::RoundRobin | Policy::Deadline)
    }
}

/// Policy and real-time priority of a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sched {
    pub policy: Policy,
    /// 1..99 for FIFO/RR, 0 otherwise.
    pub priority: u32,
}

impl Sched {
    /// One number to order threads by who preempts whom: DEADLINE above
    /// every FIFO/RR priority, those above every normal thread (0).
    pub fn rank(&self) -> u32 {
        match self.policy {
            Policy::Deadline => 100,
            Policy::Fifo | Policy::RoundRobin => self.priority,
            _ => 0,
        }
    }
}

impl fmt::Display for Sched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.policy {
            Policy::Fifo => write!(f, "FIFO {}", self.priority),
            Policy::RoundRobin => write!(f, "RR {}", self.priority),
            Policy::Deadline => f.write_str("DEADLINE"),
            Policy::Other => f.write_str("OTHER"),
            Policy::Batch => f.write_str("BATCH"),
            Policy::Idle => f.write_str("IDLE"),
            Policy::Unknown(n) => write!(f, "policy {n}"),
        }
    }
}

/// The fields of `/proc/PID[/task/TID]/stat` the checks use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskStat {
    pub comm: String,
    pub ppid: u32,
    /// PF_KTHREAD set in the flags.
    pub kernel_thread: bool,
    /// CPU it last ran on.
    pub last_cpu: u32,
    pub sched: Sched,
}

/// Parse a `stat` line: `pid (comm) state ppid ...`; the comm may hold
/// spaces and parentheses, so the fields start after the *last* `)`.
pub fn parse_task_stat(text: &str) -> Result<TaskStat, String> {
    let open = text.find('(').ok_or("no `(` before the command name")?;
    let close = text.rfind(')').ok_or("no `)` after the command name")?;
    let comm = text[open + 1..close].to_string();
    let f: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // f[0] is field 3 (state): field k is f[k - 3].
    let field = |k: usize| -> Result<u64, String> {
        f.get(k - 3)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("field {k} missing or not a number"))
    };
    const PF_KTHREAD: u64 = 0x0020_0000;
    Ok(TaskStat {
        comm,
        ppid: field(4)? as u32,
        kernel_thread: field(9)? & PF_KTHREAD != 0,
        last_cpu: field(39)? as u32,
        sched: Sched {
            policy: Policy::from_number(field(41)? as u32),
            priority: field(40)? as u32,
        },
    })
}

/// A thread of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
}

/// `/proc/PID/task/TID` directory of a thread.
pub fn task_dir(pid: u32, tid: u32) -> String {
    format!("/proc/{pid}/task/{tid}")
}

/// `/proc/PID/task/TID/stat` parsed.
pub fn read_task_stat(root: &Root, pid: u32, tid: u32) -> Result<TaskStat, Unreadable> {
    let p = format!("{}/stat", task_dir(pid, tid));
    let text = root.read(&p)?;
    parse_task_stat(&text).map_err(|e| Unreadable::new(p, e))
}

/// `Cpus_allowed_list` of a thread.
pub fn read_allowed_cpus(root: &Root, pid: u32, tid: u32) -> Result<CpuSet, Unreadable> {
    let p = format!("{}/status", task_dir(pid, tid));
    let text = root.read(&p)?;
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .ok_or_else(|| Unreadable::new(&p, "no Cpus_allowed_list line"))?;
    CpuSet::parse_list(line, None).map_err(|e| Unreadable::new(&p, e.to_string()))
}

/// A process of the process table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    pub comm: String,
    pub kernel_thread: bool,
}

/// Every process under `/proc` (processes that vanish while read are skipped).
pub fn processes(root: &Root) -> Result<Vec<Process>, Unreadable> {
    let mut out = Vec::new();
    for name in root.list("/proc")? {
        let Ok(pid) = name.parse::<u32>() else {
            continue;
        };
        if let Ok(st) = read_task_stat(root, pid, pid).or_else(|_| {
            let p = format!("/proc/{pid}/stat");
            parse_task_stat(&root.read(&p)?).map_err(|e| Unreadable::new(p, e))
        }) {
            out.push(Process {
                pid,
                comm: st.comm,
                kernel_thread: st.kernel_thread,
            });
        }
    }
    if out.is_empty() {
        // A live /proc always holds init: an empty table is not a procfs.
        return Err(Unreadable::new("/proc", "no process in it (not a procfs)"));
    }
    Ok(out)
}

/// The threads of a process, with their names.
pub fn threads(root: &Root, pid: u32) -> Result<Vec<Task>, Unreadable> {
    let dir = format!("/proc/{pid}/task");
    let mut out = Vec::new();
    for name in root.list(&dir)? {
        let Ok(tid) = name.parse::<u32>() else {
            continue;
        };
        let comm = root
            .read_trim(&format!("{dir}/{tid}/comm"))
            .or_else(|_| read_task_stat(root, pid, tid).map(|s| s.comm))
            .unwrap_or_default();
        out.push(Task { pid, tid, comm });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERRUPTS: &str = "           CPU0       CPU1       \n\
  24:          1          0  IO-APIC   5-edge      ACPI:Ged\n\
  36:          0     108577 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n\
 NMI:          0          0   Non-maskable interrupts\n\
 LOC:     129563     136843   Local timer interrupts\n\
 ERR:          0\n";

    #[test]
    fn interrupts_rows_keep_counts_per_cpu_and_the_action_name() {
        let i = Interrupts::parse(INTERRUPTS).unwrap();
        assert_eq!(i.cpus, [0, 1]);
        let r = i.row("36").unwrap();
        assert!(r.is_device());
        assert_eq!(r.counts[&1], 108577);
        assert_eq!(r.actions(), "virtio1-req.0");
        let loc = i.row("LOC").unwrap();
        assert!(!loc.is_device());
        assert_eq!(loc.counts[&0], 129563);
        assert_eq!(i.row("ERR").unwrap().counts.len(), 1);
    }

    #[test]
    fn interrupt_deltas_count_what_happened_between_two_reads() {
        let a = Interrupts::parse(INTERRUPTS).unwrap();
        let b = Interrupts::parse(&INTERRUPTS.replace("108577", "108600")).unwrap();
        let d = b.delta_since(&a);
        let r = d.iter().find(|r| r.key == "36").unwrap();
        assert_eq!(r.counts[&1], 23);
        assert_eq!(r.counts[&0], 0);
    }

    #[test]
    fn stat_lines_give_total_and_steal_ticks() {
        let s = parse_stat("cpu  10 0 5 80 1 0 0 4 0 0\ncpu0 5 0 2 40 1 0 0 2 0 0\nintr 1 2\n");
        assert_eq!(s[&None].steal, 4);
        assert_eq!(s[&None].busy_and_idle, 100);
        assert_eq!(s[&Some(0)].steal, 2);
    }

    #[test]
    fn task_stat_reads_policy_priority_and_cpu_after_a_comm_with_spaces() {
        let mut f: Vec<String> = (3..=52).map(|_| "0".to_string()).collect();
        f[0] = "S".into(); // 3 state
        f[4 - 3] = "1".into(); // ppid
        f[9 - 3] = "2097152".into(); // PF_KTHREAD
        f[39 - 3] = "1".into(); // processor
        f[40 - 3] = "50".into(); // rt_priority
        f[41 - 3] = "1".into(); // SCHED_FIFO
        let line = format!("1234 (CPU 0/KVM) x) {}", f.join(" "));
        let t = parse_task_stat(&line).unwrap();
        assert_eq!(t.comm, "CPU 0/KVM) x");
        assert!(t.kernel_thread);
        assert_eq!(t.last_cpu, 1);
        assert_eq!(t.sched.to_string(), "FIFO 50");
        assert_eq!(t.sched.rank(), 50);
    }
}
