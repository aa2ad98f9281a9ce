//! CPU sets in the kernel's two spellings: CPU lists and hex masks.
//!
//! A *CPU list* is what the kernel command line (`isolcpus=`, `nohz_full=`,
//! `rcu_nocbs=`, `irqaffinity=`, `kthread_cpus=`) and the `*_list` files
//! use. The kernel's `bitmap_parselist` reads comma-separated groups:
//!
//! * `7` one CPU, `2-5` a range (ascending);
//! * `0-15:2/4` a range cut into groups of 4 of which the first 2 are used
//!   (0,1,4,5,8,9,12,13);
//! * `N` anywhere a number goes: the numerically last CPU (`nr_cpu_ids - 1`),
//!   so `2-N` on a 4-CPU machine is `2-3`;
//! * `all` (any case): every CPU; an empty list: none.
//!
//! A *mask* is what `/proc/irq/*/smp_affinity`, `/proc/irq/default_smp_affinity`
//! and the workqueue `cpumask` files use: hex, in comma-separated 32-bit
//! words, most significant first (`00000000,0000000c` is CPUs 2 and 3).
//!
//! `isolcpus=` puts flags in front of its list (`managed_irq,domain,2-N`).
//! [`IsolcpusSpec`] reads them as `kernel/sched/isolation.c` does: while the
//! value starts with a letter, a token up to the next comma is a flag
//! (`nohz`, `domain`, `managed_irq`; any other letters-only token is skipped
//! with a kernel warning, anything else makes the kernel ignore the whole
//! parameter). So `isolcpus=N` or `isolcpus=domain,N-3` does not do what it
//! says: the kernel takes the leading `N` for a flag. Without any flag,
//! `domain` is implied; with flags, only those given apply.

use std::collections::BTreeSet;
use std::fmt;

/// A set of CPU numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuSet(BTreeSet<u32>);

/// Why a CPU list or mask could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuListError(pub String);

impl fmt::Display for CpuListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CpuListError {}

const FORMS: &str = "accepted forms: 3, 2-5, 0-15:2/4, 2-N, all, or a comma-separated mix";

impl CpuSet {
    pub fn new() -> Self {
        CpuSet::default()
    }

    /// Parse a kernel CPU list. `nr_cpu_ids` (the count in
    /// `/sys/devices/system/cpu/possible`) gives `N` and `all` their meaning;
    /// a list using them without it is refused.
    pub fn parse_list(s: &str, nr_cpu_ids: Option<u32>) -> Result<CpuSet, CpuListError> {
        let s = s.trim();
        let mut set = CpuSet::new();
        if s.is_empty() {
            return Ok(set);
        }
        if s.eq_ignore_ascii_case("all") {
            let n = need_nr(nr_cpu_ids, s)?;
            set.0.extend(0..n);
            return Ok(set);
        }
        for group in s.split(',') {
            parse_group(group, nr_cpu_ids, &mut set)
                .map_err(|e| CpuListError(format!("CPU list `{s}`: {e} ({FORMS})")))?;
        }
        Ok(set)
    }

    /// Parse a hex mask in 32-bit words (`ff`, `00000000,0000000c`).
    pub fn parse_mask(s: &str) -> Result<CpuSet, CpuListError> {
        let s = s.trim();
        let mut set = CpuSet::new();
        let words: Vec<&str> = s.split(',').collect();
        for (i, w) in words.iter().rev().enumerate() {
            let w = w.trim();
            if w.is_empty() || w.len() > 8 {
                return Err(CpuListError(format!(
                    "CPU mask `{s}`: expected hex words of up to 8 digits separated by commas"
                )));
            }
            let v = u32::from_str_radix(w, 16)
                .map_err(|_| CpuListError(format!("CPU mask `{s}`: `{w}` is not hex")))?;
            for bit in 0..32 {
                if v & (1 << bit) != 0 {
                    set.0.insert(i as u32 * 32 + bit);
                }
            }
        }
        Ok(set)
    }

    pub fn from_cpus(cpus: impl IntoIterator<Item = u32>) -> Self {
        CpuSet(cpus.into_iter().collect())
    }

    pub fn insert(&mut self, cpu: u32) {
        self.0.insert(cpu);
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.intersection(&other.0).copied().collect())
    }

    pub fn union(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.union(&other.0).copied().collect())
    }

    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.difference(&other.0).copied().collect())
    }

    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.0.is_subset(&other.0)
    }

    pub fn intersects(&self, other: &CpuSet) -> bool {
        !self.0.is_disjoint(&other.0)
    }
}

/// The compact list form (`0-3,6,8-9`); `none` when empty.
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let mut parts = Vec::new();
        let mut it = self.0.iter().copied().peekable();
        while let Some(start) = it.next() {
            let mut end = start;
            while it.peek() == Some(&(end + 1)) {
                end = it.next().unwrap_or(end);
            }
            parts.push(if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            });
        }
        f.write_str(&parts.join(","))
    }
}

fn need_nr(nr: Option<u32>, what: &str) -> Result<u32, CpuListError> {
    nr.filter(|&n| n > 0).ok_or_else(|| {
        CpuListError(format!(
            "`{what}` needs the number of CPUs (/sys/devices/system/cpu/possible), which is unknown"
        ))
    })
}

fn parse_number(s: &str, nr: Option<u32>) -> Result<u32, String> {
    if s == "N" {
        return need_nr(nr, "N").map(|n| n - 1).map_err(|e| e.0);
    }
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("`{s}` is not a CPU number"));
    }
    s.parse::<u32>()
        .map_err(|_| format!("`{s}` is too large for a CPU number"))
}

fn parse_group(group: &str, nr: Option<u32>, set: &mut CpuSet) -> Result<(), String> {
    let (range, stride) = match group.split_once(':') {
        Some((r, s)) => (r, Some(s)),
        None => (group, None),
    };
    let (first, last) = match range.split_once('-') {
        Some((a, b)) => (parse_number(a, nr)?, parse_number(b, nr)?),
        None => {
            let n = parse_number(range, nr)?;
            (n, n)
        }
    };
    if last < first {
        return Err(format!("range `{range}` is descending"));
    }
    let (used, size) = match stride {
        None => (1, 1),
        Some(s) => {
            let (u, g) = s
                .split_once('/')
                .ok_or_else(|| format!("`:{s}` must be used/group, e.g. 0-15:2/4"))?;
            let u = parse_number(u, None)?;
            let g = parse_number(g, None)?;
            if u == 0 || g == 0 || u > g {
                return Err(format!(
                    "`:{s}`: use 1 to {g} CPUs of each group of {g} (used must be 1..group)"
                ));
            }
            (u, g)
        }
    };
    let mut cpu = first;
    while cpu <= last {
        if (cpu - first) % size < used {
            set.insert(cpu);
        }
        cpu += 1;
    }
    if let Some(n) = nr {
        if last >= n {
            return Err(format!(
                "CPU {last} does not exist here (CPUs 0-{})",
                n.saturating_sub(1)
            ));
        }
    }
    Ok(())
}

/// The `isolcpus=` value: flags, then a CPU list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsolcpusSpec {
    /// `nohz`, `domain`, `managed_irq` as given (in order).
    pub flags: Vec<String>,
    /// Letters-only tokens the kernel skips with "Skipped unknown flag".
    pub unknown_flags: Vec<String>,
    /// The CPU list text after the flags.
    pub list: String,
    /// The CPUs (empty when the kernel would ignore the parameter).
    pub cpus: CpuSet,
    /// Set when the kernel ignores the whole parameter ("Invalid flag").
    pub ignored: Option<String>,
}

impl IsolcpusSpec {
    /// Read `isolcpus=` as the kernel does (see the module comment).
    pub fn parse(value: &str, nr_cpu_ids: Option<u32>) -> Result<IsolcpusSpec, CpuListError> {
        let mut rest = value.trim();
        let mut spec = IsolcpusSpec {
            flags: Vec::new(),
            unknown_flags: Vec::new(),
            list: String::new(),
            cpus: CpuSet::new(),
            ignored: None,
        };
        while rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
            let (token, after) = match rest.split_once(',') {
                Some((t, a)) => (t, a),
                None => (rest, ""),
            };
            if matches!(token, "nohz" | "domain" | "managed_irq") && !after.is_empty() {
                spec.flags.push(token.to_string());
            } else if token.chars().all(|c| c.is_ascii_alphabetic() || c == '_') {
                spec.unknown_flags.push(token.to_string());
            } else {
                spec.ignored = Some(format!(
                    "the kernel reads `{token}` as a flag (it starts with a letter) and, \
                     finding characters a flag cannot have, ignores the whole isolcpus= \
                     (\"isolcpus: Invalid flag\"); start the list with a number, e.g. 0-3 or 2-N"
                ));
                return Ok(spec);
            }
            rest = after;
        }
        spec.list = rest.to_string();
        spec.cpus = CpuSet::parse_list(rest, nr_cpu_ids)?;
        Ok(spec)
    }

    /// Whether the scheduler-domain isolation applies (explicit `domain`,
    /// or no flag at all).
    pub fn isolates_domain(&self) -> bool {
        self.flags.is_empty() || self.flags.iter().any(|f| f == "domain")
    }

    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str, nr: u32) -> String {
        CpuSet::parse_list(s, Some(nr)).unwrap().to_string()
    }

    #[test]
    fn single_cpus_and_ranges_read_as_the_kernel_writes_them() {
        assert_eq!(list("0-3,7", 8), "0-3,7");
        assert_eq!(list("3,1,2", 8), "1-3");
        assert_eq!(list("", 8), "none");
        assert_eq!(list("5\n", 8), "5");
    }

    #[test]
    fn n_is_the_last_cpu_wherever_a_number_goes() {
        assert_eq!(list("N", 4), "3");
        assert_eq!(list("2-N", 4), "2-3");
        assert_eq!(list("0,N", 16), "0,15");
        assert_eq!(list("0-N:1/2", 8), "0,2,4,6");
        let e = CpuSet::parse_list("2-N", None).unwrap_err().to_string();
        assert!(e.contains("needs the number of CPUs"), "{e}");
    }

    #[test]
    fn strides_use_the_first_cpus_of_each_group() {
        assert_eq!(list("0-7:2/4", 8), "0-1,4-5");
        assert_eq!(
            list("100-200:2/25", 256),
            "100-101,125-126,150-151,175-176,200"
        );
        assert_eq!(list("0-7:4/4", 8), "0-7");
        for bad in ["0-7:0/4", "0-7:5/4", "0-7:2", "0-7:2/0"] {
            let e = CpuSet::parse_list(bad, Some(8)).unwrap_err().to_string();
            assert!(e.contains("accepted forms"), "{bad}: {e}");
        }
    }

    #[test]
    fn all_means_every_cpu_in_any_case() {
        assert_eq!(list("all", 4), "0-3");
        assert_eq!(list("ALL", 2), "0-1");
    }

    #[test]
    fn malformed_lists_are_refused_with_the_accepted_forms() {
        for bad in ["3-1", "a", "1,,2", "1-", "-1", "1 2", "0x3", "8"] {
            let e = CpuSet::parse_list(bad, Some(8)).unwrap_err().to_string();
            assert!(e.contains("accepted forms"), "{bad}: {e}");
        }
    }

    #[test]
    fn hex_masks_read_in_32_bit_words_most_significant_first() {
        assert_eq!(CpuSet::parse_mask("3").unwrap().to_string(), "0-1");
        assert_eq!(
            CpuSet::parse_mask("00000000,0000000c").unwrap().to_string(),
            "2-3"
        );
        assert_eq!(
            CpuSet::parse_mask("00000001,00000000\n")
                .unwrap()
                .to_string(),
            "32"
        );
        assert!(CpuSet::parse_mask("0").unwrap().is_empty());
        assert!(CpuSet::parse_mask("xyz").is_err());
        assert!(CpuSet::parse_mask("123456789").is_err());
    }

    #[test]
    fn isolcpus_flags_come_before_the_list() {
        let s = IsolcpusSpec::parse("managed_irq,domain,2-N", Some(4)).unwrap();
        assert_eq!(s.flags, ["managed_irq", "domain"]);
        assert_eq!(s.cpus.to_string(), "2-3");
        assert!(s.isolates_domain() && s.has_flag("managed_irq"));
        let plain = IsolcpusSpec::parse("1,3", Some(4)).unwrap();
        assert!(plain.flags.is_empty() && plain.isolates_domain());
        assert_eq!(plain.cpus.to_string(), "1,3");
    }

    #[test]
    fn isolcpus_flags_without_domain_do_not_isolate_the_scheduler() {
        let s = IsolcpusSpec::parse("managed_irq,2-3", Some(4)).unwrap();
        assert!(!s.isolates_domain());
        assert_eq!(s.cpus.to_string(), "2-3");
    }

    #[test]
    fn isolcpus_starting_with_n_is_taken_for_a_flag_as_the_kernel_does() {
        let s = IsolcpusSpec::parse("domain,N", Some(4)).unwrap();
        assert_eq!(s.unknown_flags, ["N"]);
        assert!(s.cpus.is_empty());
        let s = IsolcpusSpec::parse("N-3", Some(4)).unwrap();
        assert!(s.ignored.as_deref().unwrap().contains("Invalid flag"));
        assert!(s.cpus.is_empty());
        let s = IsolcpusSpec::parse("foo,1", Some(4)).unwrap();
        assert_eq!(s.unknown_flags, ["foo"]);
        assert_eq!(s.cpus.to_string(), "1");
    }
}
