//! CPU lists: parse `3`, `0-3,8`, `0-15:2/4` into a [`CpuList`]; format
//! as `0-3,8`.
//!
//! The form is the kernel's (`bitmap_parselist`: the `*_list` files of
//! /sys, `isolcpus=`, `taskset -c`): groups separated by commas, each one
//! CPU (`8`), an ascending range (`0-3`), or a range cut into groups of
//! which the first few are used (`0-15:2/4` is 0,1,4,5,8,9,12,13). Groups
//! may overlap; a CPU is in the list once.
//!
//! Two kernel forms are refused: `N` (the last CPU) and `all`. A flag or a
//! config key is read before anything asks the machine how many CPUs it
//! has, and a file written for one machine must not mean other CPUs on
//! another: name the CPUs. An empty list is refused too (pinning to no CPU
//! is a mistake, not a choice), and so is a CPU number above
//! [`CPU_MAX`], the largest the kernel can have (`NR_CPUS` 8192).
//!
//! Whether the CPUs exist and may be used here is the business of the
//! code that uses them (`sched_setaffinity` says so): this is the parser.

use std::fmt;
use std::str::FromStr;

use crate::UnitError;

/// The accepted forms, the tail of every CPU list error message.
pub const CPU_LIST_FORMS: &str = "a CPU list is CPU numbers and ascending ranges separated \
     by commas, e.g. 3, 0-3,8 or 0-15:2/4 (of every 4 CPUs from 0 to 15 the first 2)";

/// The largest CPU number: the kernel has at most 8192 CPUs (`NR_CPUS`).
pub const CPU_MAX: usize = 8191;

/// A set of CPUs, at least one, in ascending order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CpuList {
    cpus: Vec<usize>,
}

impl CpuList {
    /// The CPUs, ascending, each once.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }

    /// How many CPUs.
    pub fn len(&self) -> usize {
        self.cpus.len()
    }

    /// Never: a CPU list has at least one CPU (for clippy's `len` rule).
    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty()
    }

    /// Whether `cpu` is in the list.
    pub fn contains(&self, cpu: usize) -> bool {
        self.cpus.binary_search(&cpu).is_ok()
    }
}

/// Parse a CPU list (see the module comment for the forms).
pub fn parse_cpu_list(text: &str) -> Result<CpuList, UnitError> {
    let list = text.trim();
    let refuse = |why: String| UnitError::new(format!("{why}; {CPU_LIST_FORMS}"));
    if list.is_empty() {
        return Err(refuse("an empty CPU list names no CPU".into()));
    }
    if list.eq_ignore_ascii_case("all") {
        return Err(refuse(format!(
            "`{list}` is another set of CPUs on every machine, name the CPUs"
        )));
    }
    let mut cpus = Vec::new();
    for group in list.split(',') {
        add_group(group, &mut cpus)
            .map_err(|why| refuse(format!("`{list}` is not a CPU list: {why}")))?;
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(CpuList { cpus })
}

/// Add the CPUs of one comma-separated group to `cpus`.
fn add_group(group: &str, cpus: &mut Vec<usize>) -> Result<(), String> {
    let (range, used_of) = match group.split_once(':') {
        Some((range, stride)) => (range, Some(stride)),
        None => (group, None),
    };
    if range.is_empty() {
        return Err("a group has no CPU number".into());
    }
    let (first, last) = match range.split_once('-') {
        Some((a, b)) if a.is_empty() || b.is_empty() => {
            return Err(format!(
                "the range `{range}` needs a CPU number on each side of `-`"
            ))
        }
        Some((a, b)) => (cpu_number(a)?, cpu_number(b)?),
        None => {
            let cpu = cpu_number(range)?;
            (cpu, cpu)
        }
    };
    if last < first {
        return Err(format!("the range `{range}` goes down"));
    }
    let (used, size) = match used_of {
        None => (1, 1),
        Some(stride) => {
            let bad = || {
                format!("`:{stride}` must be USED/GROUP with 1 <= USED <= GROUP, e.g. `0-15:2/4`")
            };
            let (used, size) = stride.split_once('/').ok_or_else(bad)?;
            let (used, size) = (count(used).ok_or_else(bad)?, count(size).ok_or_else(bad)?);
            if used == 0 || used > size {
                return Err(bad());
            }
            (used, size)
        }
    };
    cpus.extend((first..=last).filter(|cpu| (cpu - first) % size < used));
    Ok(())
}

/// One CPU number, 0 to [`CPU_MAX`].
fn cpu_number(text: &str) -> Result<usize, String> {
    if text == "N" {
        return Err("`N` (the last CPU) is another CPU on every machine, name the CPU".into());
    }
    match count(text) {
        Some(cpu) if cpu <= CPU_MAX => Ok(cpu),
        Some(_) => Err(format!(
            "CPU {text} is beyond the largest a kernel can have ({CPU_MAX})"
        )),
        None => Err(format!("`{text}` is not a CPU number")),
    }
}

/// A whole number written with digits only (no sign, no space).
fn count(text: &str) -> Option<usize> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Too many digits for a usize is beyond CPU_MAX anyway.
    Some(text.parse().unwrap_or(usize::MAX))
}

impl FromStr for CpuList {
    type Err = UnitError;

    fn from_str(text: &str) -> Result<Self, UnitError> {
        parse_cpu_list(text)
    }
}

/// The compact form, ascending: `0-3,8`; it parses back to the same list.
impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut cpus = self.cpus.iter().copied().peekable();
        let mut first_group = true;
        while let Some(start) = cpus.next() {
            let mut end = start;
            while let Some(next) = cpus.next_if_eq(&(end + 1)) {
                end = next;
            }
            if !first_group {
                f.write_str(",")?;
            }
            first_group = false;
            match end - start {
                0 => write!(f, "{start}")?,
                // Two neighbours read better as a list than as a range.
                1 => write!(f, "{start},{end}")?,
                _ => write!(f, "{start}-{end}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(text: &str) -> Vec<usize> {
        parse_cpu_list(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .cpus()
            .to_vec()
    }

    fn refused(text: &str) -> String {
        let e = parse_cpu_list(text).expect_err(text).to_string();
        assert!(e.ends_with(CPU_LIST_FORMS), "{text}: {e}");
        e
    }

    #[test]
    fn the_kernel_forms_are_read_as_the_kernel_reads_them() {
        assert_eq!(cpus("3"), [3]);
        assert_eq!(cpus("0-3,8"), [0, 1, 2, 3, 8]);
        assert_eq!(cpus("0-15:2/4"), [0, 1, 4, 5, 8, 9, 12, 13]);
        assert_eq!(cpus("1-7:1/2"), [1, 3, 5, 7]);
        assert_eq!(cpus("0-3:4/4"), [0, 1, 2, 3]);
        assert_eq!(cpus("8,0-2,1"), [0, 1, 2, 8]);
        assert_eq!(cpus(" 2-3\n"), [2, 3]);
        assert_eq!(cpus("5-5"), [5]);
        assert_eq!(cpus("8191"), [CPU_MAX]);
    }

    #[test]
    fn garbage_is_refused_saying_what_is_wrong_and_the_forms() {
        assert!(refused("").contains("names no CPU"));
        assert!(refused("x").contains("`x` is not a CPU number"));
        assert!(refused("0-3,").contains("a group has no CPU number"));
        assert!(refused("1 , 2").contains("`1 ` is not a CPU number"));
        assert!(refused("-1").contains("the range `-1` needs a CPU number on each side"));
        assert!(refused("2-").contains("the range `2-` needs a CPU number on each side"));
        assert!(refused("3-1").contains("the range `3-1` goes down"));
        assert!(refused("0-7:0/4").contains("`:0/4` must be USED/GROUP"));
        assert!(refused("0-7:5/4").contains("`:5/4` must be USED/GROUP"));
        assert!(refused("0-7:2").contains("`:2` must be USED/GROUP"));
        assert!(refused("8192").contains("beyond the largest a kernel can have (8191)"));
        assert!(refused("0-99999999999999999999999").contains("beyond the largest"));
        assert!(refused("2-N").contains("`N` (the last CPU)"));
        assert!(refused("all").contains("`all` is another set of CPUs on every machine"));
        assert!(refused("0x3").contains("`0x3` is not a CPU number"));
    }

    #[test]
    fn the_display_is_compact_and_parses_back() {
        for (text, shown) in [
            ("3", "3"),
            ("0-3,8", "0-3,8"),
            ("0,1", "0,1"),
            ("0,1,2", "0-2"),
            ("0-15:2/4", "0,1,4,5,8,9,12,13"),
            ("9,3-5,4", "3-5,9"),
        ] {
            let list = parse_cpu_list(text).unwrap();
            assert_eq!(list.to_string(), shown, "{text}");
            assert_eq!(shown.parse::<CpuList>().unwrap(), list, "{shown}");
        }
    }

    #[test]
    fn a_list_knows_its_cpus() {
        let list: CpuList = "1-2,6".parse().unwrap();
        assert_eq!(list.len(), 3);
        assert!(!list.is_empty());
        assert!(list.contains(6) && !list.contains(3));
    }
}
