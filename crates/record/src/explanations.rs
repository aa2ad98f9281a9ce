//! Explanations of late stages (`hoptrace trace --explain`), stored with
//! the packet segments of a recording, in their own folder.
//!
//! Files `explain/explain-NNNNNN.parquet` in the recording directory, one
//! row per *part* of an explained stage (long format, so that pandas,
//! polars and DuckDB group and sum parts directly): the packet's identity
//! (`stream`, `app_id`, `smp_cnt`, `epoch`, `seq`, `dest`, the same values
//! as its row in the segments), the stage (`stage` "a..b", `start_ns`,
//! `end_ns`, `latency_ns`), where hop b ran (`cpu`, `task`), the task's
//! wait (`sleeping_ns`, `runnable_ns`, `running_ns`) and the part
//! (`part_index` from 0, largest first; `part_kind` one of task, hardirq,
//! softirq, nmi, kvm_exit, steal, idle, unattributed; `part_name`;
//! `part_ns`). The parts of one stage add up to `latency_ns`. The stage's
//! first row also carries `lane`: the contexts of the CPUs the task waited
//! on, in time order, as a JSON list of `{cpu, start_ns, end_ns, kind,
//! name}` (null on the other rows; `cpu` absent in older recordings: the
//! stage's `cpu`). A lane whose first piece has kind `shared` refers to a
//! longer stage of the same file ([`crate::shared_lanes`]): the reader
//! rebuilds it.
//!
//! Why a folder: the explanations are another table (other columns) than
//! the segments, and the glob users point their tools at, `rec/*.parquet`,
//! must read the segments alone (DuckDB, polars and pyarrow take every
//! matching file as part of one table). Recordings written before the
//! folder existed keep their `explain-NNNNNN.parquet` beside the segments:
//! [`explanation_files`] (and so [`read_explanations`], the retention and
//! the archive) finds them in both places.
//!
//! Each [`ExplanationWriter::flush`] writes one complete file (written as
//! `.partial`, fsynced, renamed, the folder fsynced), so a killed recorder
//! keeps every explanation flushed before; the tracer flushes about once a
//! second. Contract: `docs/recording-schema.md`.

use schemars::JsonSchema;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{
    Int64Builder, StringBuilder, UInt16Builder, UInt32Builder, UInt64Builder,
};
use arrow_array::{
    Array, ArrayRef, Int64Array, RecordBatch, StringArray, UInt16Array, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;

use crate::error::{RecordError, Result};
use crate::retention::{closed_files, StoredKind};
use crate::row::PacketKey;

/// The folder of a recording directory that holds its explanation files.
pub const EXPLANATIONS_DIR: &str = "explain";

/// One part of an explained stage.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, JsonSchema)]
pub struct StagePart {
    /// `task`, `hardirq`, `softirq`, `nmi`, `kvm_exit`, `steal`, `idle` or `unattributed`.
    pub kind: String,
    /// The task (`comm/tid (policy prio)`), IRQ, softirq or exit reason; the kind for the others.
    pub name: String,
    /// Its time in the stage.
    pub ns: i64,
}

/// `kind name` as a part or lane piece is shown (`softirq NET_RX`,
/// `task hog/7`), the kind alone where it is the name (`steal`, `idle`).
pub fn part_label(kind: &str, name: &str) -> String {
    if name == kind || name.is_empty() {
        kind.to_string()
    } else {
        format!("{kind} {name}")
    }
}

impl StagePart {
    /// `kind name`, or the kind alone where it is the name ([`part_label`]).
    pub fn label(&self) -> String {
        part_label(&self.kind, &self.name)
    }
}

/// One piece of an explained stage's CPU lanes: `cpu` was in this context
/// (kind and name as the parts') from `start_ns` to `end_ns`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, JsonSchema)]
pub struct LaneSpan {
    /// The CPU (absent in recordings made before lanes had one: then the
    /// stage's `cpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// Start of the context, CLOCK_TAI.
    pub start_ns: i64,
    /// Its end.
    pub end_ns: i64,
    /// As a part's `kind`.
    pub kind: String,
    /// As a part's `name`.
    pub name: String,
}

/// One late stage of one packet, explained.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, JsonSchema)]
pub struct ExplainedStage {
    /// The packet, the same values as its row in the segments.
    #[serde(flatten)]
    pub packet: PacketKey,
    /// The stage, `FROM..TO`.
    pub stage: String,
    /// Its first hop's stamp, in the recording's clock (the segments').
    pub start_ns: i64,
    /// Its second hop's stamp.
    pub end_ns: i64,
    /// The CPU of the second hop.
    pub cpu: u32,
    /// The task that ran the second hop (`comm/tid`).
    pub task: String,
    /// Of the stage, the time that task slept.
    pub sleeping_ns: i64,
    /// The time it was runnable and waited for a CPU.
    pub runnable_ns: i64,
    /// The time it ran.
    pub running_ns: i64,
    /// What took the stage's time, largest first; the parts add up to `latency_ns`.
    pub parts: Vec<StagePart>,
    /// The contexts of the CPUs the task waited on during the stage, in
    /// time order (hop b's CPU, and before it any CPU it was moved from).
    pub lane: Vec<LaneSpan>,
}

impl ExplainedStage {
    pub fn latency_ns(&self) -> i64 {
        self.end_ns - self.start_ns
    }
}

/// The Arrow schema of an explanation file.
pub fn explanation_schema() -> Schema {
    use DataType::*;
    Schema::new(vec![
        Field::new("stream", Utf8, false),
        Field::new("app_id", UInt16, true),
        Field::new("smp_cnt", UInt16, true),
        Field::new("epoch", UInt32, true),
        Field::new("seq", UInt64, false),
        Field::new("dest", Utf8, true),
        Field::new("stage", Utf8, false),
        Field::new("start_ns", Int64, false),
        Field::new("end_ns", Int64, false),
        Field::new("latency_ns", Int64, false),
        Field::new("cpu", UInt32, false),
        Field::new("task", Utf8, false),
        Field::new("sleeping_ns", Int64, false),
        Field::new("runnable_ns", Int64, false),
        Field::new("running_ns", Int64, false),
        Field::new("part_index", UInt32, false),
        Field::new("part_kind", Utf8, false),
        Field::new("part_name", Utf8, false),
        Field::new("part_ns", Int64, false),
        Field::new("lane", Utf8, true),
    ])
}

/// A stage name as read: `from..to`, whichever spelling was stored.
fn normalised_stage(stored: &str) -> String {
    match crate::meta::split_stage_name(stored) {
        Some((from, to)) => crate::meta::stage_name(from, to),
        None => stored.to_string(),
    }
}

fn to_batch(stages: &[ExplainedStage]) -> Result<RecordBatch> {
    let mut stream = StringBuilder::new();
    let mut app_id = UInt16Builder::new();
    let mut smp_cnt = UInt16Builder::new();
    let mut epoch = UInt32Builder::new();
    let mut seq = UInt64Builder::new();
    let mut dest = StringBuilder::new();
    let mut stage = StringBuilder::new();
    let (mut start, mut end, mut lat) = (
        Int64Builder::new(),
        Int64Builder::new(),
        Int64Builder::new(),
    );
    let mut cpu = UInt32Builder::new();
    let mut task = StringBuilder::new();
    let (mut sl, mut rn, mut ru) = (
        Int64Builder::new(),
        Int64Builder::new(),
        Int64Builder::new(),
    );
    let mut idx = UInt32Builder::new();
    let (mut kind, mut name) = (StringBuilder::new(), StringBuilder::new());
    let mut ns = Int64Builder::new();
    let mut lane = StringBuilder::new();
    for s in stages {
        let lane_json = serde_json::to_string(&s.lane)
            .map_err(|e| arrow_schema::ArrowError::ExternalError(Box::new(e)))?;
        for (i, p) in s.parts.iter().enumerate() {
            let k = &s.packet;
            stream.append_value(&k.stream);
            app_id.append_option(k.app_id);
            smp_cnt.append_option(k.smp_cnt);
            epoch.append_option(k.epoch);
            seq.append_value(k.seq);
            dest.append_option(k.dest.as_deref());
            stage.append_value(&s.stage);
            start.append_value(s.start_ns);
            end.append_value(s.end_ns);
            lat.append_value(s.latency_ns());
            cpu.append_value(s.cpu);
            task.append_value(&s.task);
            sl.append_value(s.sleeping_ns);
            rn.append_value(s.runnable_ns);
            ru.append_value(s.running_ns);
            idx.append_value(i as u32);
            kind.append_value(&p.kind);
            name.append_value(&p.name);
            ns.append_value(p.ns);
            lane.append_option((i == 0).then_some(lane_json.as_str()));
        }
    }
    let cols: Vec<ArrayRef> = vec![
        Arc::new(stream.finish()),
        Arc::new(app_id.finish()),
        Arc::new(smp_cnt.finish()),
        Arc::new(epoch.finish()),
        Arc::new(seq.finish()),
        Arc::new(dest.finish()),
        Arc::new(stage.finish()),
        Arc::new(start.finish()),
        Arc::new(end.finish()),
        Arc::new(lat.finish()),
        Arc::new(cpu.finish()),
        Arc::new(task.finish()),
        Arc::new(sl.finish()),
        Arc::new(rn.finish()),
        Arc::new(ru.finish()),
        Arc::new(idx.finish()),
        Arc::new(kind.finish()),
        Arc::new(name.finish()),
        Arc::new(ns.finish()),
        Arc::new(lane.finish()),
    ];
    Ok(RecordBatch::try_new(Arc::new(explanation_schema()), cols)?)
}

/// Writes explanation files into a recording directory's
/// [`EXPLANATIONS_DIR`] folder (created with the first file).
#[derive(Debug)]
pub struct ExplanationWriter {
    /// The folder the files go into.
    dir: PathBuf,
    next: u32,
    pending: Vec<ExplainedStage>,
    /// Stages written so far.
    pub written: u64,
    /// Stages whose lane refers to a longer stage's.
    pub lanes_shared: u64,
    /// The last stages pushed into the pending file, with their whole lanes.
    recent: std::collections::VecDeque<ExplainedStage>,
}

impl ExplanationWriter {
    /// Explanations for the recording in `dir` (which exists), numbered
    /// after those a resumed recording holds already.
    pub fn new(dir: &Path) -> Self {
        let next = explanation_files(dir)
            .iter()
            .filter_map(|p| {
                let name = p.file_name()?.to_str()?;
                name.strip_prefix("explain-")?
                    .strip_suffix(".parquet")?
                    .parse::<u32>()
                    .ok()
            })
            .max()
            .unwrap_or(0)
            + 1;
        ExplanationWriter {
            dir: dir.join(EXPLANATIONS_DIR),
            next,
            pending: Vec::new(),
            written: 0,
            lanes_shared: 0,
            recent: Default::default(),
        }
    }

    /// Queue `s` for the next file; its lane is stored as a reference to a
    /// longer stage queued before it and its own tail when that rebuilds
    /// it exactly ([`crate::shared_lanes`]).
    pub fn push(&mut self, mut s: ExplainedStage) {
        let shared = crate::shared_lanes::shared_lane(self.recent.iter().rev(), &s);
        if self.recent.len() == crate::shared_lanes::CANDIDATES {
            self.recent.pop_front();
        }
        self.recent.push_back(s.clone());
        if let Some(lane) = shared {
            s.lane = lane;
            self.lanes_shared += 1;
        }
        self.pending.push(s);
    }

    /// Write what is pending as one complete file.
    pub fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let batch = to_batch(&self.pending)?;
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |source| RecordError::Io { path: p, source }
        };
        std::fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let path = self.dir.join(format!("explain-{:06}.parquet", self.next));
        let partial = path.with_extension("parquet.partial");
        let pq = |p: &Path| {
            let p = p.to_path_buf();
            move |source| RecordError::Parquet { path: p, source }
        };
        let file = File::create(&partial).map_err(io(&partial))?;
        let mut w = ArrowWriter::try_new(file, batch.schema(), None).map_err(pq(&partial))?;
        w.write(&batch).map_err(pq(&partial))?;
        let file = w.into_inner().map_err(pq(&partial))?;
        file.sync_all().map_err(io(&partial))?;
        std::fs::rename(&partial, &path).map_err(io(&path))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.dir))?;
        self.next += 1;
        self.written += self.pending.len() as u64;
        self.pending.clear();
        self.recent.clear();
        Ok(())
    }
}

fn column<'a, T: 'static>(b: &'a RecordBatch, name: &str, path: &Path) -> Result<&'a T> {
    b.column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| RecordError::NotARecording {
            path: path.to_path_buf(),
            reason: format!("explanation file without a `{name}` column of the expected type"),
        })
}

/// The closed explanation files of the recording `dir`, in order: those
/// beside the segments (recordings written before the [`EXPLANATIONS_DIR`]
/// folder), then the folder's, each by number. None: the recording was
/// made without `--explain`, or `dir` is not readable.
pub fn explanation_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(files) = closed_files(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = files
        .into_iter()
        .filter(|(_, kind)| *kind == StoredKind::Explanations)
        .map(|(name, _)| name)
        .collect();
    // `explain-...` sorts before `explain/...`: the older layout first.
    names.sort();
    names.into_iter().map(|n| dir.join(n)).collect()
}

/// Every explanation of the recording `dir`, in order (none: the
/// recording was made without `--explain`).
pub fn read_explanations(dir: &Path) -> Result<Vec<ExplainedStage>> {
    let mut out: Vec<ExplainedStage> = Vec::new();
    for path in explanation_files(dir) {
        let file = File::open(&path).map_err(|source| RecordError::Io {
            path: path.clone(),
            source,
        })?;
        let pq = |source| RecordError::Parquet {
            path: path.clone(),
            source,
        };
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(pq)?
            .build()
            .map_err(pq)?;
        let first = out.len();
        for b in reader {
            let b = b?;
            read_batch(&b, &path, &mut out)?;
        }
        crate::shared_lanes::restore_lanes(&mut out[first..]);
    }
    Ok(out)
}

fn read_batch(b: &RecordBatch, path: &Path, out: &mut Vec<ExplainedStage>) -> Result<()> {
    let stream = column::<StringArray>(b, "stream", path)?;
    let app_id = column::<UInt16Array>(b, "app_id", path)?;
    let smp_cnt = column::<UInt16Array>(b, "smp_cnt", path)?;
    let epoch = column::<UInt32Array>(b, "epoch", path)?;
    let seq = column::<UInt64Array>(b, "seq", path)?;
    let dest = column::<StringArray>(b, "dest", path)?;
    let stage = column::<StringArray>(b, "stage", path)?;
    let start = column::<Int64Array>(b, "start_ns", path)?;
    let end = column::<Int64Array>(b, "end_ns", path)?;
    let cpu = column::<UInt32Array>(b, "cpu", path)?;
    let task = column::<StringArray>(b, "task", path)?;
    let sl = column::<Int64Array>(b, "sleeping_ns", path)?;
    let rn = column::<Int64Array>(b, "runnable_ns", path)?;
    let ru = column::<Int64Array>(b, "running_ns", path)?;
    let idx = column::<UInt32Array>(b, "part_index", path)?;
    let kind = column::<StringArray>(b, "part_kind", path)?;
    let name = column::<StringArray>(b, "part_name", path)?;
    let ns = column::<Int64Array>(b, "part_ns", path)?;
    let lane = column::<StringArray>(b, "lane", path)?;
    let opt = |a: &dyn Array, i: usize| !a.is_null(i);
    for i in 0..b.num_rows() {
        if idx.value(i) == 0 || out.is_empty() {
            out.push(ExplainedStage {
                packet: PacketKey {
                    stream: stream.value(i).to_string(),
                    app_id: opt(app_id, i).then(|| app_id.value(i)),
                    smp_cnt: opt(smp_cnt, i).then(|| smp_cnt.value(i)),
                    epoch: opt(epoch, i).then(|| epoch.value(i)),
                    seq: seq.value(i),
                    dest: opt(dest, i).then(|| dest.value(i).to_string()),
                },
                stage: normalised_stage(stage.value(i)),
                start_ns: start.value(i),
                end_ns: end.value(i),
                cpu: cpu.value(i),
                task: task.value(i).to_string(),
                sleeping_ns: sl.value(i),
                runnable_ns: rn.value(i),
                running_ns: ru.value(i),
                parts: Vec::new(),
                lane: if lane.is_null(i) {
                    Vec::new()
                } else {
                    serde_json::from_str(lane.value(i)).map_err(|e| RecordError::NotARecording {
                        path: path.to_path_buf(),
                        reason: format!("explanation lane is not valid JSON: {e}"),
                    })?
                },
            });
        }
        if let Some(s) = out.last_mut() {
            s.parts.push(StagePart {
                kind: kind.value(i).to_string(),
                name: name.value(i).to_string(),
                ns: ns.value(i),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(seq: u64, parts: &[(&str, &str, i64)]) -> ExplainedStage {
        ExplainedStage {
            packet: PacketKey {
                stream: "SV1".into(),
                app_id: Some(0x4000),
                smp_cnt: Some(seq as u16),
                epoch: Some(0),
                seq,
                dest: Some("tap0".into()),
            },
            stage: "tap_xmit..consumer_copy".into(),
            start_ns: 1000,
            end_ns: 1000 + parts.iter().map(|p| p.2).sum::<i64>(),
            cpu: 1,
            task: "reader/5".into(),
            sleeping_ns: 0,
            runnable_ns: 10,
            running_ns: 2,
            lane: vec![LaneSpan {
                cpu: Some(1),
                start_ns: 1000,
                end_ns: 1100,
                kind: "task".into(),
                name: "hog/7 (FIFO 50)".into(),
            }],
            parts: parts
                .iter()
                .map(|&(k, n, ns)| StagePart {
                    kind: k.into(),
                    name: n.into(),
                    ns,
                })
                .collect(),
        }
    }

    #[test]
    fn explanations_written_in_two_flushes_read_back_whole_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = ExplanationWriter::new(dir.path());
        let a = stage(
            1,
            &[("task", "hog/7 (FIFO 50)", 900), ("unattributed", "x", 100)],
        );
        let b = stage(2, &[("softirq", "NET_RX", 50)]);
        let c = stage(3, &[("steal", "steal", 70), ("task", "reader/5", 30)]);
        w.push(a.clone());
        w.push(b.clone());
        w.flush().unwrap();
        w.flush().unwrap(); // nothing pending: no file
        w.push(c.clone());
        w.flush().unwrap();
        assert_eq!(w.written, 3);
        let names = |d: &Path| -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        // Their own folder: the recording's `*.parquet` are its segments.
        assert_eq!(names(dir.path()), [EXPLANATIONS_DIR]);
        assert_eq!(
            names(&dir.path().join(EXPLANATIONS_DIR)),
            ["explain-000001.parquet", "explain-000002.parquet"]
        );
        assert_eq!(read_explanations(dir.path()).unwrap(), vec![a, b, c]);
    }

    #[test]
    fn a_burst_of_overlapping_stages_stores_one_whole_lane_and_reads_back_every_lane() {
        // A reader stopped 150 ms: frames every 250 us wait for it, each
        // copied 3 us after the one before when it runs again; meanwhile
        // its CPU alternates between two tasks every 50 us.
        let piece = |a: i64, b: i64, name: &str| LaneSpan {
            cpu: Some(1),
            start_ns: a,
            end_ns: b,
            kind: "task".into(),
            name: name.into(),
        };
        let release = 150_000_000i64;
        let mut burst = Vec::new();
        for k in 0..600i64 {
            let (start, end) = (k * 250_000, release + k * 3_000);
            let mut lane = Vec::new();
            let mut t = start;
            while t < release {
                let next = ((t / 50_000) + 1) * 50_000;
                let name = if (t / 50_000) % 2 == 0 {
                    "hog/7"
                } else {
                    "sh/9"
                };
                lane.push(piece(t, next.min(release), name));
                t = next;
            }
            lane.push(piece(release, end, "reader/5"));
            let mut s = stage(k as u64, &[("task", "hog/7", end - start)]);
            (s.start_ns, s.end_ns, s.lane) = (start, end, lane);
            burst.push(s);
        }
        let dir = tempfile::tempdir().unwrap();
        let mut w = ExplanationWriter::new(dir.path());
        for s in &burst {
            w.push(s.clone());
        }
        assert_eq!(w.lanes_shared, 599);
        w.flush().unwrap();
        assert_eq!(read_explanations(dir.path()).unwrap(), burst);
        // One whole lane of 3000 pieces, and 599 references of 2 pieces.
        let file = &explanation_files(dir.path())[0];
        let bytes = std::fs::metadata(file).unwrap().len();
        assert!(bytes < 1_000_000, "{bytes} bytes");
    }

    #[test]
    fn explanations_beside_the_segments_as_older_recordings_keep_them_are_read_too() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (stage(1, &[("task", "x", 5)]), stage(2, &[("idle", "y", 7)]));
        let mut w = ExplanationWriter::new(dir.path());
        w.push(a.clone());
        w.flush().unwrap();
        w.push(b.clone());
        w.flush().unwrap();
        // The older layout: the first file beside the segments.
        let folder = dir.path().join(EXPLANATIONS_DIR);
        std::fs::rename(
            folder.join("explain-000001.parquet"),
            dir.path().join("explain-000001.parquet"),
        )
        .unwrap();
        assert_eq!(
            explanation_files(dir.path()),
            [
                dir.path().join("explain-000001.parquet"),
                folder.join("explain-000002.parquet")
            ]
        );
        assert_eq!(read_explanations(dir.path()).unwrap(), vec![a, b]);
    }

    #[test]
    fn a_stage_stored_as_from_arrow_to_reads_as_the_one_spelling_from_dot_dot_to() {
        let dir = tempfile::tempdir().unwrap();
        let mut old = stage(1, &[("task", "x", 5)]);
        old.stage = "tap_xmit->consumer_copy".into();
        let mut w = ExplanationWriter::new(dir.path());
        w.push(old);
        w.flush().unwrap();
        let read = read_explanations(dir.path()).unwrap();
        assert_eq!(read[0].stage, "tap_xmit..consumer_copy");
        assert_eq!(
            read[0].stage,
            crate::meta::stage_name("tap_xmit", "consumer_copy")
        );
    }

    #[test]
    fn a_recording_without_explanations_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_explanations(dir.path()).unwrap().is_empty());
    }

    #[test]
    fn a_lane_piece_written_before_lanes_had_a_cpu_reads_without_one() {
        let old = r#"[{"start_ns":1,"end_ns":2,"kind":"task","name":"hog/7"}]"#;
        let lane: Vec<LaneSpan> = serde_json::from_str(old).unwrap();
        assert_eq!(lane[0].cpu, None);
        assert_eq!(lane[0].name, "hog/7");
        let now = serde_json::to_string(&stage(1, &[("task", "x", 5)]).lane).unwrap();
        assert!(now.starts_with(r#"[{"cpu":1,"#), "{now}");
    }
}
