//! The closed segments must be readable by the usual data tools without
//! help: pandas, pyarrow, polars and DuckDB (python3). Missing python3 or a
//! package: fail under CI=true, skip with a message otherwise.

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

#[test]
fn pandas_pyarrow_polars_duckdb_read_segments() {
    if let Err(why) = python_ok() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{why} (install them: apt-get install python3-pandas python3-pyarrow, pip install polars duckdb)");
        }
        eprintln!("SKIP pandas_pyarrow_polars_duckdb_read_segments: {why}");
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
    let out = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python readers failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("python readers ok"));
}
