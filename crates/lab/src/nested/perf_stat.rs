//! Reader of `perf kvm stat report` output (the cross-check of the nested
//! lab: the same exits counted by perf in the same guest).
//!
//! The report is a table after a header line starting with `VM-EXIT`:
//!
//! ```text
//!              VM-EXIT    Samples  Samples%     Time%    Min Time    Max Time         Avg time
//!                   io      20000    98.02%    97.51%     40.54us  11215.16us     65.42us ( +-   1.02% )
//! ```
//!
//! A reason's name may hold spaces (`PF excp`): the row is read from its
//! right end (the numeric columns), and what is left is the name.

/// One row of the table.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PerfRow {
    pub reason: String,
    pub samples: u64,
    pub min_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
}

fn us(t: &str) -> Option<f64> {
    t.strip_suffix("us")?.parse().ok()
}

/// The rows of a `perf kvm stat report` (empty when there is no table).
pub fn parse_report(text: &str) -> Vec<PerfRow> {
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("VM-EXIT") {
            in_table = true;
            continue;
        }
        if !in_table || t.is_empty() {
            continue;
        }
        // Drop the `( +-   1.02% )` spread, then read from the right.
        let core = t.split(" ( +-").next().unwrap_or(t);
        let w: Vec<&str> = core.split_whitespace().collect();
        if w.len() < 7 {
            continue;
        }
        let n = w.len();
        let (Ok(samples), Some(min_us), Some(max_us), Some(mean_us)) = (
            w[n - 6].parse::<u64>(),
            us(w[n - 3]),
            us(w[n - 2]),
            us(w[n - 1]),
        ) else {
            continue;
        };
        rows.push(PerfRow {
            reason: w[..n - 6].join(" "),
            samples,
            min_us,
            max_us,
            mean_us,
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_read_from_the_right_so_names_may_hold_spaces() {
        let text = "\nAnalyze events for all VMs, all VCPUs:\n\n             VM-EXIT    Samples  Samples%     Time%    Min Time    Max Time         Avg time \n\n                  io      20000    98.02%    97.51%     40.54us  11215.16us     65.42us ( +-   1.02% )\n             PF excp          3     0.01%     0.00%     10.00us     12.00us     11.00us ( +-   5.00% )\n\nTotal Samples:20003, Total events handled time:1308400.00us.\n";
        let r = parse_report(text);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].reason.as_str(), r[0].samples), ("io", 20000));
        assert_eq!(r[0].mean_us, 65.42);
        assert_eq!((r[1].reason.as_str(), r[1].samples), ("PF excp", 3));
        assert!(parse_report("no table here").is_empty());
    }
}
