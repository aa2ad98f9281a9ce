//! Exports for other tools.
//!
//! - CSV (`--csv`): one line per packet in the window, its identity and the
//!   latency of every selected stage (empty when a hop is missing). A second
//!   streaming pass over the recording.
//! - HdrHistogram interval log (`--hdr-log`): one interval per (stream,
//!   stage), tagged `stream/stage`, V2 compressed histograms in base64, as
//!   written by HdrHistogram's `HistogramLogWriter` (readable by
//!   `HistogramLogProcessor`, hdrhistogram.rs, HdrHistogram_py). Values are ns.
//!   Negative values cannot be stored in an HdrHistogram: they are counted in a
//!   `#negative` comment line per tag.
//! - rt-tests JSON (`--rt-json`): the shape `cyclictest --json` writes:
//!   `{"file_version":1, ..., "num_threads":N, "resolution_in_ns":1000,
//!   "thread":{"0":{"histogram":{"<us>":count,...},"cycles":n,"min":us,"max":us,
//!   "avg":us,...}}}`, one "thread" per (stream, stage) named in
//!   `thread.N.hoptrace_stream` / `hoptrace_stage`; the histogram is the 1 us
//!   linear view (non-empty bins), with the overflow count in `hoptrace_overflow`.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::Context;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use serde_json::{json, Map, Value};

use crate::analyzer::{Analyzer, Config};

/// HdrHistogram interval log of every (stream, stage).
pub fn write_hdr_log(path: &Path, a: &Analyzer) -> anyhow::Result<()> {
    let mut buf: Vec<u8> = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    let start = a.first_time_ns.unwrap_or(0).max(0);
    let base = UNIX_EPOCH + Duration::from_nanos(start as u64);
    {
        let mut w = IntervalLogWriterBuilder::new()
            .add_comment("hoptrace latency histograms (ns), one interval per stream/stage")
            .with_start_time(base)
            .with_base_time(base)
            .begin_log_with(&mut buf, &mut ser)
            .context("starting the HdrHistogram log")?;
        let span = (a.last_time_ns.unwrap_or(start) - start).max(0) as u64;
        for s in a.streams.values() {
            for (i, st) in s.stages.iter().enumerate() {
                let tag_text = format!("{}/{}", s.name, a.stages[i].name).replace([',', ' '], "_");
                w.write_comment(&format!("#negative {} {}", tag_text, st.stats.negatives()))
                    .context("writing the HdrHistogram log")?;
                let tag = Tag::new(&tag_text);
                w.write_histogram(
                    &st.stats.histogram(),
                    Duration::ZERO,
                    Duration::from_nanos(span),
                    tag,
                )
                .map_err(|e| anyhow::anyhow!("serializing a histogram: {e:?}"))?;
            }
        }
    }
    std::fs::write(path, buf).with_context(|| format!("cannot write {}", path.display()))
}

/// rt-tests (cyclictest --json) shaped histogram file.
pub fn write_rt_json(path: &Path, a: &Analyzer, command_line: &[String]) -> anyhow::Result<()> {
    let mut threads = Map::new();
    let mut n = 0;
    for s in a.streams.values() {
        for (i, st) in s.stages.iter().enumerate() {
            let stats = &st.stats;
            let (bins, overflow) = stats.linear_view();
            let mut h = Map::new();
            for (us, c) in bins.iter().enumerate() {
                if *c > 0 {
                    h.insert(us.to_string(), json!(c));
                }
            }
            threads.insert(
                n.to_string(),
                json!({
                    "histogram": h,
                    "cycles": stats.count(),
                    "min": stats.min().map(|v| v / 1000),
                    "max": stats.max().map(|v| v / 1000),
                    "avg": stats.mean().map(|m| (m / 10.0).round() / 100.0),
                    "cpu": 0,
                    "node": 0,
                    "hoptrace_stream": s.name,
                    "hoptrace_stage": a.stages[i].name,
                    "hoptrace_overflow": overflow,
                    "hoptrace_negative": stats.negatives(),
                }),
            );
            n += 1;
        }
    }
    let doc = json!({
        "file_version": 1,
        "cmdline:": command_line.join(" "),
        "rt_test_version:": format!("hoptrace {}", env!("CARGO_PKG_VERSION")),
        "return_code": 0,
        "num_threads": n,
        "resolution_in_ns": 1000,
        "thread": Value::Object(threads),
    });
    std::fs::write(path, serde_json::to_vec_pretty(&doc)?)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Per-packet CSV: second pass over the recording with the same window.
pub fn write_csv(path: &Path, recording: &Path, config: &Config) -> anyhow::Result<u64> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, UInt16Type, UInt32Type, UInt64Type};
    use arrow_array::Array;

    let reader = hoptrace_record::RecordingReader::open(recording)
        .with_context(|| format!("cannot open recording {}", recording.display()))?;
    let probe = Analyzer::new(config.clone(), crate::load::hops_of(reader.meta()))
        .map_err(anyhow::Error::msg)?;
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    write!(out, "stream,smp_cnt,epoch,seq,time_ns")?;
    for s in &probe.stages {
        write!(out, ",{}_ns", s.name)?;
    }
    writeln!(out)?;
    let hop_cols: Vec<String> = probe.hops.iter().map(|h| h.column.clone()).collect();
    let mut seen: std::collections::HashMap<String, u64> = Default::default();
    let mut origin: Option<i64> = None;
    let mut lines = 0u64;
    for b in reader.batches_sized(None, 65536)? {
        let b = b?;
        let stream = b.column_by_name("stream").context("no stream column")?;
        let stream = arrow_array::cast::as_string_array(stream.as_ref());
        let seq = b
            .column_by_name("seq")
            .context("no seq column")?
            .as_primitive::<UInt64Type>()
            .clone();
        let smp = b
            .column_by_name("smp_cnt")
            .map(|c| c.as_primitive::<UInt16Type>().clone());
        let ep = b
            .column_by_name("epoch")
            .map(|c| c.as_primitive::<UInt32Type>().clone());
        let hops: Vec<_> = hop_cols
            .iter()
            .map(|c| {
                b.column_by_name(c)
                    .map(|x| x.as_primitive::<Int64Type>().clone())
            })
            .collect::<Option<Vec<_>>>()
            .context("hop column missing")?;
        for r in 0..b.num_rows() {
            let name = stream.value(r);
            if !config.streams.is_empty() && !config.streams.iter().any(|s| s == name) {
                continue;
            }
            let t: Vec<Option<i64>> = hops
                .iter()
                .map(|h| (!h.is_null(r)).then(|| h.value(r)))
                .collect();
            let first = t[0].or_else(|| t.iter().flatten().next().copied());
            if origin.is_none() {
                origin = first;
            }
            let k = seen.entry(name.to_string()).or_default();
            *k += 1;
            let w = &config.window;
            if *k <= w.skip_warmup {
                continue;
            }
            if w.from_ns.is_some() || w.to_ns.is_some() {
                let Some(off) = first.zip(origin).map(|(a, o)| a - o) else {
                    continue;
                };
                if w.from_ns.is_some_and(|f| off < f) || w.to_ns.is_some_and(|e| off >= e) {
                    continue;
                }
            }
            write!(
                out,
                "{},{},{},{},{}",
                csv_escape(name),
                smp.as_ref()
                    .filter(|c| !c.is_null(r))
                    .map_or(String::new(), |c| c.value(r).to_string()),
                ep.as_ref()
                    .filter(|c| !c.is_null(r))
                    .map_or(String::new(), |c| c.value(r).to_string()),
                seq.value(r),
                first.map_or(String::new(), |x| x.to_string())
            )?;
            for s in &probe.stages {
                match (t[s.from], t[s.to]) {
                    (Some(a), Some(b)) => write!(out, ",{}", b - a)?,
                    _ => write!(out, ",")?,
                }
            }
            writeln!(out)?;
            lines += 1;
        }
    }
    out.flush()?;
    Ok(lines)
}

fn csv_escape(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
