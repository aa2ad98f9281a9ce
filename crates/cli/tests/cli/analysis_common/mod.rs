//! Shared helpers of the `report` and `compare` CLI tests: recordings written
//! with the project's own writer (`hoptrace-record`) from known per-packet
//! values, and an independent computation of the figures (sort + nearest
//! rank, two-pass mean/stddev) to check the CLI output against.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hoptrace_record::{
    ClockDomain, HopColumn, PacketRowRef, PacketStatus, RecordingMeta, RecordingWriter,
    RotatePolicy, StampSource,
};

pub const BIN: &str = env!("CARGO_BIN_EXE_hoptrace");
/// Time of seq 0 (ns since the epoch, TAI domain).
pub const T0: i64 = 1_763_800_000_000_000_000;
/// 4000 samples/s.
pub const PERIOD: i64 = 250_000;

/// One packet: stream, seq, hop times.
#[derive(Clone, Debug)]
pub struct Pkt {
    pub stream: String,
    pub seq: u64,
    pub hops: Vec<Option<i64>>,
}

/// A scratch directory removed on drop (the CLI crate has no tempfile dev-dependency).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("hoptrace-an-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Write `pkts` (in this order) as a recording with hops `hop_names`.
pub fn write_recording(dir: &Path, hop_names: &[&str], pkts: &[Pkt]) {
    write_recording_with(dir, hop_names, pkts, RotatePolicy::default(), |_| {});
}

/// [`write_recording`] with the writer's `policy` (e.g. a segment every
/// N rows).
pub fn write_segments(dir: &Path, hop_names: &[&str], pkts: &[Pkt], policy: RotatePolicy) {
    write_recording_with(dir, hop_names, pkts, policy, |_| {});
}

/// [`write_recording`] with the writer's `policy` and the metadata changed
/// by `edit` first.
pub fn write_recording_with(
    dir: &Path,
    hop_names: &[&str],
    pkts: &[Pkt],
    policy: RotatePolicy,
    edit: impl FnOnce(&mut RecordingMeta),
) {
    let hops = hop_names
        .iter()
        .map(|n| HopColumn::new(*n, ClockDomain::Tai, StampSource::Bpf, "test"))
        .collect();
    let mut meta = RecordingMeta::for_this_host("test", hops);
    meta.rate = Some(4000);
    edit(&mut meta);
    let mut w = RecordingWriter::create(dir, meta, policy).unwrap();
    for p in pkts {
        w.append_ref(PacketRowRef {
            stream: &p.stream,
            dst_mac: None,
            app_id: None,
            smp_cnt: Some((p.seq % 4000) as u16),
            epoch: Some((p.seq / 4000) as u32),
            seq: p.seq,
            dest: None,
            status: PacketStatus::Ok,
            drop_reason: None,
            drop_hop: None,
            hops: &p.hops,
            extra: &[],
        })
        .unwrap();
    }
    w.close().unwrap();
}

/// Figures computed independently from the values.
#[derive(Debug, Clone)]
pub struct Expect {
    pub count: u64,
    pub min: i64,
    pub max: i64,
    pub mean: f64,
    pub stddev: f64,
    pub sorted: Vec<i64>,
}

impl Expect {
    pub fn of(values: &[i64]) -> Expect {
        let mut s = values.to_vec();
        s.sort_unstable();
        let n = s.len() as f64;
        let mean = s.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = s.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
        Expect {
            count: s.len() as u64,
            min: s[0],
            max: *s.last().unwrap(),
            mean,
            stddev: var.sqrt(),
            sorted: s,
        }
    }
    /// Nearest rank: v(k), k = max(1, ceil(p n)) computed in integers
    /// (p given as parts per 100 000).
    pub fn pct(&self, p_per_100k: u64) -> i64 {
        let n = self.sorted.len() as u64;
        let k = (p_per_100k * n).div_ceil(100_000).max(1);
        self.sorted[(k - 1) as usize]
    }
    pub fn above(&self, t: i64) -> u64 {
        self.sorted.iter().filter(|&&v| v > t).count() as u64
    }
}

/// Run the binary.
pub fn hoptrace(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn show(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// Run `hoptrace ARGS --json JS`: it must exit with `code`. Its output
/// and the JSON it wrote.
pub fn run_json(args: &[&str], js: &Path, code: i32) -> (Output, serde_json::Value) {
    let o = Command::new(BIN)
        .args(args)
        .arg("--json")
        .arg(js)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(code), "{}", show(&o));
    let v = read_json(js);
    if args.first() == Some(&"report") {
        assert_valid_report(&v);
    }
    (o, v)
}

/// Assert a JSON stats object against an independent computation.
pub fn check_stats(st: &serde_json::Value, e: &Expect, what: &str) {
    assert_eq!(st["count"], e.count, "{what}: count");
    assert_eq!(st["min_ns"], e.min, "{what}: min");
    assert_eq!(st["max_ns"], e.max, "{what}: max");
    let mean = st["mean_ns"].as_f64().unwrap();
    assert!(
        (mean - e.mean).abs() <= 1e-6 * e.mean.abs() + 1e-6,
        "{what}: mean {mean} vs {}",
        e.mean
    );
    let sd = st["stddev_ns"].as_f64().unwrap();
    assert!(
        (sd - e.stddev).abs() <= 1e-6 * e.stddev + 1e-6,
        "{what}: stddev {sd} vs {}",
        e.stddev
    );
    for p in st["percentiles"].as_array().unwrap() {
        let pf = p["p"].as_f64().unwrap();
        let per100k = (pf * 100_000.0).round() as u64;
        assert_eq!(p["value_ns"], e.pct(per100k), "{what}: p{pf}");
        assert_eq!(p["exact"], true, "{what}: p{pf} exact");
        let need = (10.0 / (1.0 - pf)).round() as u64;
        assert_eq!(
            p["meaningful"],
            e.count >= need,
            "{what}: p{pf} meaningful flag"
        );
    }
    for a in st["above"].as_array().unwrap() {
        let t = a["threshold_ns"].as_i64().unwrap();
        assert_eq!(a["count"], e.above(t), "{what}: above {t}");
    }
    assert_eq!(
        st["negative_count"],
        e.sorted.iter().filter(|&&v| v < 0).count() as u64,
        "{what}: negatives"
    );
}

/// Validate a report JSON (`report --json`) against the shipped schema,
/// docs/report.schema.json: every object of it is closed, so a field the
/// schema (and so the field tables of docs/report-json.md) does not name
/// fails as surely as a wrong type. Panics with every error found.
pub fn assert_valid_report(report: &serde_json::Value) {
    if let Some(e) = report_schema_errors(report) {
        panic!("the report does not follow docs/report.schema.json:\n{e}");
    }
}

/// What makes `report` invalid against docs/report.schema.json, or None.
pub fn report_schema_errors(report: &serde_json::Value) -> Option<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/report.schema.json");
    let schema: serde_json::Value = read_json(&path);
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    let loc = path.canonicalize().unwrap().display().to_string();
    compiler.add_resource(&loc, schema).unwrap();
    let index = compiler.compile(&loc, &mut schemas).unwrap();
    schemas
        .validate(report, index)
        .err()
        .map(|e| format!("{e:#}"))
}
