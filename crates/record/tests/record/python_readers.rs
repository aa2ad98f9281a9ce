//! The closed segments must be readable by the usual data tools without
//! help: pandas, pyarrow, polars and DuckDB (python3), and the glob of a
//! recording's Parquet files (`rec/*.parquet`) must read one table even
//! when the tracer stored explanations with it (they have their own
//! folder, `rec/explain/`). Missing python3 or a package: fail under
//! CI=true, skip with a message otherwise.

#![allow(clippy::manual_is_multiple_of)]

use std::process::Command;
use std::time::Duration;

use hoptrace_record::*;

const SCRIPT: &str = r#"
import json, sys, glob
import pandas, pyarrow.parquet as pq, polars, duckdb
d = sys.argv[1]
files = sorted(glob.glob(d + "/segment-*.parquet"))
assert len(files) == 3, files
df = pandas.concat([pandas.read_parquet(f) for f in files])
assert len(df) == 2500, len(df)
assert list(df["seq"][:3]) == [0, 1, 2]
assert df["stream"].iloc[1] == "MU01"
assert df["dst_mac"].iloc[0] == "01:0c:cd:04:00:00"
assert df["t_app"].isna().sum() == 1250, df["t_app"].isna().sum()
assert (df["t_rx"].iloc[10] - 10_000) == 0
assert set(df["status"]) == {"ok", "dropped"}
p = polars.read_parquet(d + "/segment-*.parquet")
assert p.height == 2500
assert p.filter(polars.col("status") == "dropped").height == 1250
assert p["drop_reason"].drop_nulls()[0] == "SKB_DROP_REASON_NOT_SPECIFIED"
n = duckdb.sql(f"select count(*) from '{d}/*.parquet'").fetchall()[0][0]
assert n == 2500, n
m = duckdb.sql(f"select max(t_app - t_rx) from '{d}/*.parquet'").fetchall()[0][0]
assert m == 150, m
meta = json.loads(pq.read_schema(files[1]).metadata[b"hoptrace"])
assert meta["format"] == "hoptrace-recording" and meta["format_version"] == 1
assert meta["segment"] == 2, meta["segment"]
assert [h["column"] for h in meta["hops"]] == ["t_rx", "t_app"]
assert meta["hops"][0]["clock"] == "REALTIME"
print("python readers ok")
"#;

fn python_ok() -> Result<(), String> {
    let out = Command::new("python3")
        .args(["-c", "import pandas, pyarrow, polars, duckdb"])
        .output()
        .map_err(|e| format!("python3 not runnable: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "python3 lacks pandas/pyarrow/polars/duckdb: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// False (with a message) when the Python readers are missing outside CI.
fn python_readers_here(test: &str) -> bool {
    match python_ok() {
        Ok(()) => true,
        Err(why) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{why} (install them: scripts/setup.sh, or pip install pandas pyarrow polars duckdb)")
        }
        Err(why) => {
            eprintln!("SKIP {test}: {why}");
            false
        }
    }
}

/// Run `script` with `args`; panics with its output unless it prints `ok`.
fn run_python(script: &str, args: &[&std::path::Path]) {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("python readers ok"),
        "python readers failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn pandas_pyarrow_polars_duckdb_read_segments() {
    if !python_readers_here("pandas_pyarrow_polars_duckdb_read_segments") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rec");
    let hops = vec![
        HopColumn::new("rx", ClockDomain::Realtime, StampSource::Software, "veth1"),
        HopColumn::new(
            "app",
            ClockDomain::Realtime,
            StampSource::Application,
            "sub",
        ),
    ];
    let policy = RotatePolicy {
        max_age: Duration::from_secs(3600),
        max_rows: 1000,
        row_group_rows: 300,
        ..RotatePolicy::default()
    };
    let mut w =
        RecordingWriter::create(&dir, RecordingMeta::for_this_host("test", hops), policy).unwrap();
    for i in 0..2500u64 {
        let ok = i % 2 == 0;
        let t = i as i64 * 1000;
        let h = [Some(t), ok.then_some(t + 150)];
        w.append_ref(PacketRowRef {
            stream: if i % 2 == 0 { "MU00" } else { "MU01" },
            dst_mac: Some([1, 0x0c, 0xcd, 4, 0, (i % 2) as u8]),
            app_id: Some(0x4000),
            smp_cnt: Some(i as u16),
            epoch: Some(0),
            seq: i,
            dest: None,
            status: if ok {
                PacketStatus::Ok
            } else {
                PacketStatus::Dropped
            },
            drop_reason: (!ok).then_some("SKB_DROP_REASON_NOT_SPECIFIED"),
            drop_hop: (!ok).then_some("rx"),
            hops: &h,
            extra: &[],
        })
        .unwrap();
    }
    assert_eq!(w.close().unwrap().segments, 3);
    run_python(SCRIPT, &[&dir]);
}

/// The tracer's recording: 3 segments of packets (hops rx, fwd; extra
/// columns cpu, consumer_tid) and 2 explanation files of 3 and 2 parts.
const TRACER_SCRIPT: &str = r#"
import sys, glob
import pandas, polars, duckdb
d = sys.argv[1]
n = duckdb.sql(f"select count(*), max(t_fwd - t_rx) from '{d}/*.parquet'").fetchall()[0]
assert n == (2500, 70), n
assert polars.scan_parquet(d + "/*.parquet").select(polars.len()).collect().item() == 2500
df = pandas.read_parquet(sorted(glob.glob(d + "/*.parquet")))
assert len(df) == 2500 and set(df.columns) >= {"t_rx", "t_fwd", "cpu", "consumer_tid"}, df.columns
x = duckdb.sql(f"select count(*), sum(part_ns) from '{d}/explain/*.parquet'").fetchall()[0]
assert x == (5, 1230), x
assert polars.scan_parquet(d + "/explain/*.parquet").select(polars.col("part_ns").sum()).collect().item() == 1230
ex = pandas.read_parquet(sorted(glob.glob(d + "/explain/*.parquet")))
assert list(ex["part_index"]) == [0, 1, 0, 0, 1], list(ex["part_index"])
print("python readers ok")
"#;

fn explained(seq: u64, parts: &[(&str, i64)]) -> ExplainedStage {
    ExplainedStage {
        packet: hoptrace_record::PacketKey {
            stream: "MU00".into(),
            app_id: Some(0x4000),
            smp_cnt: Some(seq as u16),
            epoch: Some(0),
            seq,
            dest: Some("tap0".into()),
        },
        stage: "rx..fwd".into(),
        start_ns: seq as i64 * 1000,
        end_ns: seq as i64 * 1000 + parts.iter().map(|p| p.1).sum::<i64>(),
        cpu: 1,
        task: "reader/5".into(),
        sleeping_ns: 0,
        runnable_ns: 10,
        running_ns: 2,
        parts: parts
            .iter()
            .map(|&(k, ns)| StagePart {
                kind: k.into(),
                name: format!("{k} part"),
                ns,
            })
            .collect(),
        lane: Vec::new(),
    }
}

#[test]
fn the_documented_glob_reads_a_tracer_recording_with_explanations_as_one_table() {
    if !python_readers_here(
        "the_documented_glob_reads_a_tracer_recording_with_explanations_as_one_table",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rec");
    let hops = ["rx", "fwd"]
        .map(|h| HopColumn::new(h, ClockDomain::Tai, StampSource::Bpf, "tp_btf"))
        .to_vec();
    let mut meta = RecordingMeta::for_this_host("trace", hops);
    meta.extra_columns = vec![
        ExtraColumn::new("cpu", "CPU of the last hop seen"),
        ExtraColumn::new("consumer_tid", "thread of the copy"),
    ];
    let policy = RotatePolicy {
        max_age: Duration::from_secs(3600),
        max_rows: 1000,
        row_group_rows: 300,
        ..RotatePolicy::default()
    };
    let mut w = RecordingWriter::create(&dir, meta, policy).unwrap();
    // As the tracer does: the explanations go with the recording's directory.
    let mut x = ExplanationWriter::new(&dir);
    for i in 0..2500u64 {
        let t = i as i64 * 1000;
        w.append_ref(PacketRowRef {
            stream: "MU00",
            dst_mac: None,
            app_id: Some(0x4000),
            smp_cnt: Some((i % 4000) as u16),
            epoch: Some(0),
            seq: i,
            dest: Some("tap0"),
            status: PacketStatus::Ok,
            drop_reason: None,
            drop_hop: None,
            hops: &[Some(t), Some(t + 30 + (i % 41) as i64)],
            extra: &[Some(1), None],
        })
        .unwrap();
        if i == 100 {
            x.push(explained(i, &[("task", 600), ("softirq", 300)]));
            x.push(explained(i + 1, &[("steal", 200)]));
            x.flush().unwrap();
        }
    }
    x.push(explained(2000, &[("hardirq", 100), ("unattributed", 30)]));
    x.flush().unwrap();
    assert_eq!(w.close().unwrap().segments, 3);
    run_python(TRACER_SCRIPT, &[&dir]);
    // Three stages (of 2, 1 and 2 parts), from the folder.
    assert_eq!(read_explanations(&dir).unwrap().len(), 3);
}
