//! libvirt's CPU-set syntax (`cpuset='1-4,^3,6'` in `vcpupin`,
//! `emulatorpin`, `iothreadpin`, `vcpusched vcpus=`, `numatune nodeset=`):
//! comma-separated items, each a number `N`, a range `N-M`, or an
//! exclusion `^N` that removes `N` from what the other items gave (in any
//! order, as libvirt's `virBitmapParse` reads it). Spaces around items are
//! allowed. An empty set, a reversed range or a number above
//! [`MAX_CPU`] is an error.

use std::collections::BTreeSet;
use std::fmt;

use serde::Serialize;

/// Largest CPU (or NUMA node) number accepted: libvirt's own bitmap limit
/// is 2^16; a bigger number is a typo, not a machine.
pub const MAX_CPU: u32 = 65_535;

/// A set of CPU (or NUMA node) numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cpus(BTreeSet<u32>);

impl Cpus {
    /// Parses libvirt's syntax (see the module comment).
    pub fn parse(s: &str) -> Result<Cpus, String> {
        let mut add = BTreeSet::new();
        let mut remove = BTreeSet::new();
        for item in s.split(',').map(str::trim) {
            if let Some(n) = item.strip_prefix('^') {
                remove.insert(number(n, s)?);
                continue;
            }
            match item.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (number(a, s)?, number(b, s)?);
                    if a > b {
                        return Err(format!("`{s}`: range {a}-{b} runs backwards"));
                    }
                    add.extend(a..=b);
                }
                None => {
                    add.insert(number(item, s)?);
                }
            }
        }
        let set: BTreeSet<u32> = add.difference(&remove).copied().collect();
        if set.is_empty() {
            return Err(format!("`{s}` names no CPU"));
        }
        Ok(Cpus(set))
    }

    pub fn from_cpus(cpus: impl IntoIterator<Item = u32>) -> Cpus {
        Cpus(cpus.into_iter().collect())
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }
}

fn number(t: &str, whole: &str) -> Result<u32, String> {
    let n: u32 = t
        .trim()
        .parse()
        .map_err(|_| format!("`{whole}`: `{t}` is not a CPU number"))?;
    if n > MAX_CPU {
        return Err(format!("`{whole}`: CPU {n} is above {MAX_CPU}"));
    }
    Ok(n)
}

/// The shortest list form: `0-3,6`.
impl fmt::Display for Cpus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut it = self.0.iter().copied().peekable();
        while let Some(start) = it.next() {
            let mut end = start;
            while it.peek() == Some(&(end + 1)) {
                end = it.next().unwrap_or(end);
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if end == start {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

/// Serialized as its list text (`"1-4"`), as libvirt writes it.
impl Serialize for Cpus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_lists_and_exclusions_read_as_libvirt_reads_them() {
        assert_eq!(Cpus::parse("1-4,^3,6").unwrap().to_string(), "1-2,4,6");
        assert_eq!(Cpus::parse("^2, 0-3").unwrap().to_string(), "0-1,3");
        assert_eq!(Cpus::parse("0").unwrap().to_string(), "0");
        assert_eq!(Cpus::parse("5,1,2,3").unwrap().to_string(), "1-3,5");
    }

    #[test]
    fn empty_backwards_and_non_numeric_sets_are_refused_with_the_text() {
        for (bad, says) in [
            ("", "not a CPU number"),
            ("3-1", "runs backwards"),
            ("1,x", "`x` is not a CPU number"),
            ("2,^2", "names no CPU"),
            ("70000", "above 65535"),
        ] {
            let e = Cpus::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
