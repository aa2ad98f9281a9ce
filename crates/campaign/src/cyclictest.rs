//! cyclictest's histogram file (`-h N --histfile=FILE`), read as the
//! untrusted bytes it is.
//!
//! The file (rt-tests 2.x) is a `# Histogram` line, then one line per 1 us
//! bucket: the bucket's value then one count per thread (`000042 000017
//! 000003`), then `# Key: value value...` lines with one value per thread:
//! `Total` (the samples in the buckets), `Min Latencies`, `Avg
//! Latencies`, `Max Latencies`, `Histogram Overflows` (samples past the
//! last bucket), and others (`Histogram Overflow at cycle number`, `Thread
//! N: ...`) that are skipped. Counts add saturating: a hostile file makes
//! wrong figures, never a panic (fuzz/fuzz_targets/read_cyclictest.rs).
//! [`parse_histogram`] returns one [`CyclictestThread`] per column; a
//! file cut short (cyclictest killed before it wrote its summary) or a
//! line that is not of the form is a [`CyclictestError`] naming the line.
//! [`CyclictestThread::merge`] adds two runs of the same thread (a
//! campaign resumed): buckets and counts add, min/max are the extremes.

use serde::Serialize;

/// What is wrong with a histogram file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CyclictestError {
    #[error("line {line}: {what}")]
    BadLine { line: usize, what: String },
    #[error("no `# Max Latencies` line: the file was cut before cyclictest's summary (killed, disk full?)")]
    NoSummary,
    #[error("no histogram line: not a cyclictest --histfile file")]
    Empty,
}

/// One measuring thread's figures (microseconds).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CyclictestThread {
    /// Count per 1 us bucket, from 0 us.
    pub buckets: Vec<u64>,
    /// Samples in the buckets (cyclictest's `Total`: overflows are not in it).
    pub total: u64,
    pub min_us: u64,
    pub avg_us: u64,
    pub max_us: u64,
    /// Samples past the last bucket.
    pub overflows: u64,
}

impl CyclictestThread {
    /// Add another run of the same thread.
    pub fn merge(&mut self, o: &CyclictestThread) {
        if self.buckets.len() < o.buckets.len() {
            self.buckets.resize(o.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a = a.saturating_add(*b);
        }
        let total = self.total.saturating_add(o.total);
        if total > 0 {
            self.avg_us = ((self.avg_us as u128 * self.total as u128
                + o.avg_us as u128 * o.total as u128)
                / total as u128) as u64;
        }
        self.min_us = match (self.total, o.total) {
            (0, _) => o.min_us,
            (_, 0) => self.min_us,
            _ => self.min_us.min(o.min_us),
        };
        self.max_us = self.max_us.max(o.max_us);
        self.overflows = self.overflows.saturating_add(o.overflows);
        self.total = total;
    }

    /// The buckets' sum (cyclictest's `Total` when the file is whole).
    pub fn in_buckets(&self) -> u64 {
        self.buckets.iter().fold(0u64, |a, b| a.saturating_add(*b))
    }

    /// Every sample: in the buckets and past them.
    pub fn samples(&self) -> u64 {
        self.total.saturating_add(self.overflows)
    }
}

fn number(word: &str, line: usize) -> Result<u64, CyclictestError> {
    word.parse().map_err(|_| CyclictestError::BadLine {
        line,
        what: format!("{word:?} is not a number"),
    })
}

/// Parse a histogram file's bytes.
pub fn parse_histogram(bytes: &[u8]) -> Result<Vec<CyclictestThread>, CyclictestError> {
    let text = String::from_utf8_lossy(bytes);
    let mut threads: Vec<CyclictestThread> = Vec::new();
    let mut summary = false;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let Some((key, values)) = rest.split_once(':') else {
                continue;
            };
            let field: fn(&mut CyclictestThread) -> &mut u64 = match key.trim() {
                "Total" => |t| &mut t.total,
                "Min Latencies" => |t| &mut t.min_us,
                "Avg Latencies" => |t| &mut t.avg_us,
                "Max Latencies" => {
                    summary = true;
                    |t| &mut t.max_us
                }
                "Histogram Overflows" => |t| &mut t.overflows,
                _ => continue,
            };
            let values: Vec<&str> = values.split_whitespace().collect();
            if values.len() != threads.len() {
                return Err(CyclictestError::BadLine {
                    line: n,
                    what: format!("{} values for {} threads", values.len(), threads.len()),
                });
            }
            for (t, v) in threads.iter_mut().zip(values) {
                *field(t) = number(v, n)?;
            }
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let bucket = number(words[0], n)? as usize;
        let counts = &words[1..];
        if threads.is_empty() {
            if counts.is_empty() || counts.len() > 1024 {
                return Err(CyclictestError::BadLine {
                    line: n,
                    what: "a bucket line needs 1 to 1024 thread columns".into(),
                });
            }
            threads = vec![CyclictestThread::default(); counts.len()];
        }
        if counts.len() != threads.len() {
            return Err(CyclictestError::BadLine {
                line: n,
                what: format!(
                    "{} columns, the first bucket line had {}",
                    counts.len(),
                    threads.len()
                ),
            });
        }
        if bucket != threads[0].buckets.len() {
            return Err(CyclictestError::BadLine {
                line: n,
                what: format!(
                    "bucket {bucket} where {} was expected",
                    threads[0].buckets.len()
                ),
            });
        }
        for (t, c) in threads.iter_mut().zip(counts) {
            t.buckets.push(number(c, n)?);
        }
    }
    if threads.is_empty() {
        return Err(CyclictestError::Empty);
    }
    if !summary {
        return Err(CyclictestError::NoSummary);
    }
    Ok(threads)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape rt-tests 2.5 writes (`cyclictest -t2 -h 4 --histfile`).
    const TWO_THREADS: &str = "# Histogram\n000000 000000\t000000\n000001 000005\t000001\n000002 000003\t000007\n000003 000000\t000001\n# Total: 000000008 000000009\n# Min Latencies: 00001 00001\n# Avg Latencies: 00002 00002\n# Max Latencies: 00009 00003\n# Histogram Overflows: 00002 00001\n# Histogram Overflow at cycle number:\n# Thread 0: 00004 00007\n# Thread 1: 00002\n";

    #[test]
    fn buckets_and_summary_are_read_per_thread() {
        let t = parse_histogram(TWO_THREADS.as_bytes()).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].buckets, [0, 5, 3, 0]);
        assert_eq!(t[1].buckets, [0, 1, 7, 1]);
        assert_eq!(
            (
                t[0].total,
                t[0].min_us,
                t[0].avg_us,
                t[0].max_us,
                t[0].overflows
            ),
            (8, 1, 2, 9, 2)
        );
        assert_eq!(t[0].in_buckets(), t[0].total);
        assert_eq!(t[0].samples(), 10);
        assert_eq!(t[1].max_us, 3);
    }

    #[test]
    fn a_file_cut_before_the_summary_or_with_a_bad_line_is_an_error_naming_it() {
        let cut = &TWO_THREADS[..TWO_THREADS.find("# Total").unwrap()];
        assert_eq!(
            parse_histogram(cut.as_bytes()),
            Err(CyclictestError::NoSummary)
        );
        let bad = TWO_THREADS.replace("000002 000003", "000002 0x0003");
        assert_eq!(
            parse_histogram(bad.as_bytes()).unwrap_err().to_string(),
            "line 4: \"0x0003\" is not a number"
        );
        let skipped = TWO_THREADS.replace("000001 000005\t000001\n", "");
        assert!(parse_histogram(skipped.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("bucket 2 where 1"));
        let short = TWO_THREADS.replace("# Max Latencies: 00009 00003", "# Max Latencies: 00009");
        assert!(parse_histogram(short.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("1 values for 2 threads"));
        assert_eq!(
            parse_histogram(b"# Histogram\n"),
            Err(CyclictestError::Empty)
        );
    }

    #[test]
    fn two_runs_of_a_thread_merge_into_their_sum_and_extremes() {
        let t = parse_histogram(TWO_THREADS.as_bytes()).unwrap();
        let mut a = t[0].clone();
        a.merge(&t[1]);
        assert_eq!(a.buckets, [0, 6, 10, 1]);
        assert_eq!(
            (a.total, a.min_us, a.max_us, a.overflows, a.avg_us),
            (17, 1, 9, 3, 2)
        );
    }
}
