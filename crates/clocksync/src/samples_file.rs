//! The samples file: every raw sample of a run, so the estimate can be
//! recomputed offline (`hoptrace clock estimate FILE`).
//!
//! Text, tab-separated, one sample per line after a header of `# key: value`
//! lines that names the channel, the clock each side read, their
//! granularity and TAI offsets:
//!
//! ```text
//! # hoptrace clock samples 1
//! # channel: virtio-serial org.hoptrace.clock
//! # host_clock: TAI
//! # guest_clock: TAI
//! # ...
//! kind  seq  t1                   t2                   t3                   t4
//! x     1    1718000000000000000  1718000000000150000  1718000000000160000  1718000000000300000
//! ```
//!
//! (fields separated by one tab)
//!
//! Kind `x`: a two-way exchange (t1 host send, t2 guest receive, t3 guest
//! send, t4 host receive). Kind `k`: a `ptp_kvm` reading taken in the guest
//! (t1 = t4 = the host's REALTIME read through the PHC, t3 / t2 = the guest's
//! REALTIME just before / after), see [`crate::ptp`]. Lines are flushed as
//! they are written: a run that is killed keeps what it measured.

use std::io::Write;
use std::path::Path;

use hoptrace_record::meta::ClockDomain;

use crate::clock::{domain_name, parse_domain};
use crate::sample::{Sample, SampleKind};

/// First line of every samples file.
pub const MAGIC: &str = "# hoptrace clock samples 1";
const COLUMNS: &str = "kind\tseq\tt1\tt2\tt3\tt4";

/// What the header says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SamplesMeta {
    /// How the samples were taken (e.g. `virtio-serial org.hoptrace.clock`).
    pub channel: String,
    pub host_clock: ClockDomain,
    pub guest_clock: ClockDomain,
    pub host_resolution_ns: i64,
    pub guest_resolution_ns: i64,
    /// TAI − REALTIME of each side, whole seconds (`adjtimex`).
    pub host_tai_offset_s: Option<i64>,
    pub guest_tai_offset_s: Option<i64>,
    /// Host name and kernel of each side.
    pub host: String,
    pub guest: String,
    /// The guest's `ptp_kvm` device, when it has one.
    pub ptp_kvm: Option<String>,
}

/// A parsed samples file.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplesFile {
    pub meta: SamplesMeta,
    pub rows: Vec<(SampleKind, Sample)>,
}

/// A samples file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SamplesFileError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("line {line}: {what}")]
    Format { line: usize, what: String },
}

fn opt(v: Option<i64>) -> String {
    v.map_or("unknown".into(), |x| x.to_string())
}

impl SamplesMeta {
    fn header(&self) -> String {
        let lines = [
            MAGIC.to_string(),
            format!("# channel: {}", self.channel),
            format!("# host_clock: {}", domain_name(self.host_clock)),
            format!("# guest_clock: {}", domain_name(self.guest_clock)),
            format!("# host_resolution_ns: {}", self.host_resolution_ns),
            format!("# guest_resolution_ns: {}", self.guest_resolution_ns),
            format!("# host_tai_offset_s: {}", opt(self.host_tai_offset_s)),
            format!("# guest_tai_offset_s: {}", opt(self.guest_tai_offset_s)),
            format!("# host: {}", self.host),
            format!("# guest: {}", self.guest),
            format!("# ptp_kvm: {}", self.ptp_kvm.as_deref().unwrap_or("none")),
            "# x: t1 host send, t2 guest receive, t3 guest send, t4 host receive (ns, each side's clock)".into(),
            "# k: ptp_kvm reading: t1 = t4 host REALTIME via the PHC, t3 guest REALTIME before, t2 after".into(),
            COLUMNS.into(),
        ];
        lines.join("\n") + "\n"
    }

    fn from_pairs(pairs: &[(String, String)]) -> Result<SamplesMeta, SamplesFileError> {
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
                .ok_or_else(|| SamplesFileError::Format {
                    line: 1,
                    what: format!("the header has no `# {k}:` line"),
                })
        };
        let clock = |k: &str| {
            parse_domain(&get(k)?).map_err(|what| SamplesFileError::Format { line: 1, what })
        };
        let int = |k: &str| {
            let v = get(k)?;
            v.parse::<i64>().map_err(|_| SamplesFileError::Format {
                line: 1,
                what: format!("`# {k}: {v}` is not an integer"),
            })
        };
        let ptp = get("ptp_kvm").unwrap_or_else(|_| "none".into());
        Ok(SamplesMeta {
            channel: get("channel")?,
            host_clock: clock("host_clock")?,
            guest_clock: clock("guest_clock")?,
            host_resolution_ns: int("host_resolution_ns")?,
            guest_resolution_ns: int("guest_resolution_ns")?,
            host_tai_offset_s: int("host_tai_offset_s").ok(),
            guest_tai_offset_s: int("guest_tai_offset_s").ok(),
            host: get("host").unwrap_or_default(),
            guest: get("guest").unwrap_or_default(),
            ptp_kvm: (ptp != "none").then_some(ptp),
        })
    }
}

/// Writes a samples file line by line.
pub struct SamplesWriter {
    file: std::fs::File,
}

impl SamplesWriter {
    /// Create `path` (replacing it) and write the header.
    pub fn create(path: &Path, meta: &SamplesMeta) -> std::io::Result<SamplesWriter> {
        let mut file = std::fs::File::create(path)?;
        file.write_all(meta.header().as_bytes())?;
        Ok(SamplesWriter { file })
    }

    /// Append one sample (written through at once).
    pub fn push(&mut self, kind: SampleKind, s: &Sample) -> std::io::Result<()> {
        writeln!(
            self.file,
            "{}\t{}\t{}\t{}\t{}\t{}",
            kind.tag(),
            s.seq,
            s.t1,
            s.t2,
            s.t3,
            s.t4
        )
    }
}

impl SamplesFile {
    /// Read and parse `path`.
    pub fn read(path: &Path) -> Result<SamplesFile, SamplesFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| SamplesFileError::Io {
            path: path.display().to_string(),
            source,
        })?;
        SamplesFile::parse(&text)
    }

    /// Parse the text of a samples file.
    pub fn parse(text: &str) -> Result<SamplesFile, SamplesFileError> {
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, l)) if l.trim_end() == MAGIC => {}
            other => {
                return Err(SamplesFileError::Format {
                    line: 1,
                    what: format!(
                    "not a hoptrace clock samples file: the first line is `{}`, expected `{MAGIC}`",
                    other.map_or("", |(_, l)| l)
                ),
                })
            }
        }
        let mut pairs = Vec::new();
        let mut rows = Vec::new();
        let mut meta = None;
        for (i, line) in lines {
            let n = i + 1;
            if let Some(rest) = line.strip_prefix("# ") {
                if let Some((k, v)) = rest.split_once(": ") {
                    pairs.push((k.trim().to_string(), v.trim().to_string()));
                }
                continue;
            }
            if line.trim().is_empty() {
                continue;
            }
            if line.trim_end() == COLUMNS {
                meta = Some(SamplesMeta::from_pairs(&pairs)?);
                continue;
            }
            if meta.is_none() {
                return Err(SamplesFileError::Format {
                    line: n,
                    what: format!("sample before the column line `{COLUMNS}`"),
                });
            }
            rows.push(parse_row(line, n)?);
        }
        let meta = meta.ok_or(SamplesFileError::Format {
            line: 1,
            what: format!("no column line `{COLUMNS}`: the header is incomplete"),
        })?;
        Ok(SamplesFile { meta, rows })
    }

    /// The samples of one kind, in file order.
    pub fn samples(&self, kind: SampleKind) -> Vec<Sample> {
        self.rows
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, s)| *s)
            .collect()
    }
}

fn parse_row(line: &str, n: usize) -> Result<(SampleKind, Sample), SamplesFileError> {
    let bad = |what: String| SamplesFileError::Format { line: n, what };
    let f: Vec<&str> = line.split('\t').collect();
    if f.len() != 6 {
        return Err(bad(format!(
            "{} tab-separated fields, expected 6 ({COLUMNS}): `{line}`",
            f.len()
        )));
    }
    let kind =
        SampleKind::from_tag(f[0]).ok_or_else(|| bad(format!("kind `{}` is not x or k", f[0])))?;
    let int = |i: usize| {
        f[i].parse::<i64>()
            .map_err(|_| bad(format!("field {} `{}` is not an integer", i + 1, f[i])))
    };
    let seq = f[1]
        .parse::<u64>()
        .map_err(|_| bad(format!("seq `{}` is not an integer", f[1])))?;
    Ok((
        kind,
        Sample {
            seq,
            t1: int(2)?,
            t2: int(3)?,
            t3: int(4)?,
            t4: int(5)?,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> SamplesMeta {
        SamplesMeta {
            channel: "virtio-serial org.hoptrace.clock".into(),
            host_clock: ClockDomain::Tai,
            guest_clock: ClockDomain::Tai,
            host_resolution_ns: 1,
            guest_resolution_ns: 1,
            host_tai_offset_s: Some(37),
            guest_tai_offset_s: None,
            host: "h 6.18".into(),
            guest: "g 6.1".into(),
            ptp_kvm: None,
        }
    }

    #[test]
    fn a_written_samples_file_reads_back_identically() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("clock-samples.tsv");
        let mut w = SamplesWriter::create(&p, &meta()).unwrap();
        let a = Sample {
            seq: 1,
            t1: 10,
            t2: 25,
            t3: 27,
            t4: 40,
        };
        let k = Sample {
            seq: 1,
            t1: 100,
            t2: 130,
            t3: 120,
            t4: 100,
        };
        w.push(SampleKind::Exchange, &a).unwrap();
        w.push(SampleKind::PtpKvm, &k).unwrap();
        drop(w);
        let f = SamplesFile::read(&p).unwrap();
        assert_eq!(f.meta, meta());
        assert_eq!(f.samples(SampleKind::Exchange), vec![a]);
        assert_eq!(f.samples(SampleKind::PtpKvm), vec![k]);
    }

    #[test]
    fn a_damaged_samples_file_says_which_line_and_why() {
        let good = meta().header() + "x\t1\t10\t25\t27\t40\n";
        assert!(SamplesFile::parse(&good).is_ok());
        let e = SamplesFile::parse(&(good.clone() + "x\t2\t10\t25\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 16") && e.contains("expected 6"), "{e}");
        let e = SamplesFile::parse(&(good + "x\t3\t1o\t25\t27\t40\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`1o` is not an integer"), "{e}");
        let e = SamplesFile::parse("seq,t1\n").unwrap_err().to_string();
        assert!(e.contains("not a hoptrace clock samples file"), "{e}");
        let e = SamplesFile::parse(&format!("{MAGIC}\n# channel: c\n{COLUMNS}\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no `# host_clock:` line"), "{e}");
    }
}
