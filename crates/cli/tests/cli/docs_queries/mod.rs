//! The queries the docs show run, as written, on every producer's
//! recording, with DuckDB, polars and pandas, and read the right rows.
//!
//! The Python blocks are taken from the docs at test time (a doc edit that
//! breaks a query fails here): docs/recording-schema.md's "Reading" block
//! (end to end per stream with each tool) runs from the folder that holds
//! each recording as `rec`, and its "Explanations" block on the tracer's
//! recording; docs/watch.md's archive queries (SQL and Python) run on a
//! tree `hoptrace archive` made of every recording, their root replaced.
//! Each snippet is followed by checks on the variables it defines: the row
//! count the producer wrote, the same p99 per stream from the three
//! tools, the explained parts and their total. A recording written before
//! the explanations had their folder (explanation files beside the
//! segments) is read with the globs the docs give for it.
//!
//! The recordings come from `producers` (each producer's own writing
//! code). Python with pandas, pyarrow, polars and duckdb is needed
//! (scripts/setup.sh): without it the tests fail under CI=true and are
//! skipped otherwise.

mod producers;

use std::path::Path;
use std::process::Command;

use crate::analysis_common::{hoptrace, show, TempDir};
use producers::{write_all, Recordings};

/// The fenced blocks of language `lang` in the section of `doc` that
/// starts with the heading `heading` (up to the next `## ` heading).
fn blocks(doc: &str, heading: &str, lang: &str) -> Vec<String> {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs")
            .join(doc),
    )
    .unwrap();
    let start = text
        .find(&format!("\n{heading}"))
        .unwrap_or_else(|| panic!("{doc} has no section `{heading}`"));
    let section = &text[start + 1..];
    let end = section[3..].find("\n## ").map_or(section.len(), |e| e + 3);
    let section = &section[..end];
    let fence = format!("```{lang}\n");
    let mut out = Vec::new();
    let mut rest = section;
    while let Some(a) = rest.find(&fence) {
        let body = &rest[a + fence.len()..];
        let b = body.find("```").expect("an unterminated code block");
        out.push(body[..b].to_string());
        rest = &body[b + 3..];
    }
    assert!(!out.is_empty(), "{doc}, `{heading}`: no ```{lang} block");
    out
}

/// The single block of `lang` in the section.
fn block(doc: &str, heading: &str, lang: &str) -> String {
    let mut b = blocks(doc, heading, lang);
    assert_eq!(
        b.len(),
        1,
        "{doc}, `{heading}`: one ```{lang} block expected"
    );
    b.remove(0)
}

fn python_ready(test: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import pandas, pyarrow, polars, duckdb"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "python3 with pandas, pyarrow, polars and duckdb is needed (scripts/setup.sh)"
        );
        eprintln!("SKIP {test}: python3 with pandas, pyarrow, polars and duckdb is missing");
    }
    ok
}

/// Run `snippet` then `checks` as one script in `cwd` with `args`; the
/// error (stderr) unless it printed `checked`.
fn python(cwd: &Path, snippet: &str, checks: &str, args: &[String]) -> Result<(), String> {
    let script = format!("{snippet}\n# --- the test's checks ---\n{checks}\nprint(\"checked\")\n");
    let out = Command::new("python3")
        .arg("-c")
        .arg(&script)
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap();
    if out.status.success() && String::from_utf8_lossy(&out.stdout).contains("checked") {
        Ok(())
    } else {
        Err(format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// After the "Reading" block: the producer, the rows with each tool, and
/// the same p99 per stream from the three (one of them a number).
const READING_CHECKS: &str = r#"
import sys
rows, producer = int(sys.argv[1]), sys.argv[2]
assert meta["producer"] == producer, meta["producer"]
assert len(df) == rows, ("pandas", len(df), rows)
assert lf.select(polars.len()).collect().item() == rows, "polars"
assert sum(r[1] for r in p99_duckdb) == rows, ("duckdb", p99_duckdb)
duck = {r[0]: r[2] for r in p99_duckdb}
pol = dict(zip(p99_polars["stream"].to_list(), p99_polars["p99_ns"].to_list()))
pan = {k: (None if pandas.isna(v) else float(v)) for k, v in p99_pandas.items()}
assert set(duck) == set(pol) == set(pan), (duck, pol, pan)
assert any(v is not None for v in duck.values()), duck
for s, v in duck.items():
    got = [pol[s], pan[s]]
    if v is None:
        assert got == [None, None], (s, v, got)
    else:
        assert all(g is not None and abs(g - v) <= 1e-6 * max(1.0, abs(v)) for g in got), (s, v, got)
"#;

/// After the "Explanations" block: the stages, the parts and their total.
const EXPLANATION_CHECKS: &str = r#"
import sys
n_stages, n_parts, total = map(int, sys.argv[1:4])
assert stages == n_stages, (stages, n_stages)
assert len(parts) == n_parts, (len(parts), n_parts)
assert sum(r[2] for r in culprits) == total, culprits
assert int(by_part.sum()) == total, by_part
"#;

/// After the "Rollups" block: every row with a stamp is in the packet
/// counts, and each stream's and stage's count, max and exact mean from
/// the rollups are the raw rows' (DuckDB on the segments).
const ROLLUP_CHECKS: &str = r#"
import sys
rows = int(sys.argv[1])
counted = duckdb.sql("select coalesce(sum(count), 0) from 'rec/rollups/*.parquet' where stage is null").fetchall()[0][0]
assert 0 < counted <= rows, (counted, rows)
assert len(pieces) > 0
for stream, stage, n, max_ns, mean_ns in week:
    a, b = stage.split("..")
    raw = duckdb.execute(f"select count(*), max(t_{b} - t_{a}), avg(t_{b} - t_{a}) from 'rec/*.parquet' where stream = ? and t_{a} is not null and t_{b} is not null", [stream]).fetchall()[0]
    assert (n, max_ns) == raw[:2], (stream, stage, n, max_ns, raw)
    assert (mean_ns is None) == (raw[2] is None), (stream, stage, mean_ns, raw)
    assert mean_ns is None or abs(float(mean_ns) - raw[2]) <= 1e-6 * max(1.0, abs(raw[2])), (stream, stage, mean_ns, raw)
assert len(hist) == len(pieces[pieces["stage"].notna()]), (len(hist), len(pieces))
"#;

fn rollups() -> String {
    block(
        "recording-schema.md",
        "## Rollups (`rollups/rollup-NNNNNN.parquet`)",
        "python",
    )
}

fn reading() -> String {
    block("recording-schema.md", "## Reading", "python")
}

fn explanations() -> String {
    block(
        "recording-schema.md",
        "## Explanations (`hoptrace trace --explain --record`)",
        "python",
    )
}

fn explanation_args(r: &Recordings) -> Vec<String> {
    let e = r.explained;
    vec![
        e.stages.to_string(),
        e.parts.to_string(),
        e.total_ns.to_string(),
    ]
}

/// The explained spikes `hoptrace report REC --json` lists.
fn reported_explanations(rec: &Path, json: &Path) -> u64 {
    let (rec, json) = (rec.display().to_string(), json.display().to_string());
    let out = hoptrace(&["report", &rec, "--json", &json]);
    assert!(out.status.success(), "{}", show(&out));
    let rep: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    rep["runs"][0]["explanations"]
        .as_array()
        .map_or(0, |a| a.len() as u64)
}

/// The producers of docs/recording-schema.md's "Producers" table.
fn documented_producers() -> Vec<String> {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/recording-schema.md"),
    )
    .unwrap();
    let start = text.find("\n## Producers\n").expect("a Producers section");
    let section = &text[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(String::from)
        .collect()
}

#[test]
fn the_documented_queries_read_every_producers_recording_as_one_table_with_duckdb_polars_and_pandas(
) {
    if !python_ready("the_documented_queries_read_every_producers_recording") {
        return;
    }
    let d = TempDir::new("docs-queries");
    let r = write_all(d.path());
    let mut made: Vec<String> = r.made.iter().map(|m| m.producer.to_string()).collect();
    let mut documented = documented_producers();
    made.sort();
    documented.sort();
    assert_eq!(
        made, documented,
        "every documented producer, and only those"
    );
    let snippet = reading();
    let mut failed = Vec::new();
    for m in &r.made {
        let args = [m.rows.to_string(), m.producer.to_string()];
        if let Err(e) = python(&m.home, &snippet, READING_CHECKS, &args) {
            failed.push(format!("{} ({}): {e}", m.producer, m.rec().display()));
        }
    }
    let trace = r.of("trace");
    if let Err(e) = python(
        &trace.home,
        &explanations(),
        EXPLANATION_CHECKS,
        &explanation_args(&r),
    ) {
        failed.push(format!("trace explanations: {e}"));
    }
    for m in &r.made {
        let args = [m.rows.to_string()];
        if let Err(e) = python(&m.home, &rollups(), ROLLUP_CHECKS, &args) {
            failed.push(format!(
                "{} rollups ({}): {e}",
                m.producer,
                m.rec().display()
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
    // `hoptrace report` finds them in their folder.
    let json = d.path().join("report.json");
    assert_eq!(
        reported_explanations(&trace.rec(), &json),
        r.explained.stages
    );
}

#[test]
fn a_tracer_recording_with_explanations_beside_its_segments_reads_with_the_globs_the_docs_give_for_it(
) {
    if !python_ready("a_tracer_recording_with_explanations_beside_its_segments") {
        return;
    }
    let (segments, beside) = ("rec/segment-*.parquet", "rec/explain-*.parquet");
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/recording-schema.md"),
    )
    .unwrap();
    assert!(
        doc.contains(segments) && doc.contains(beside),
        "the docs name {segments} and {beside}"
    );
    let d = TempDir::new("docs-queries-old");
    let r = write_all(d.path());
    // The older layout: the explanation files moved beside the segments.
    let rec = r.of("trace").rec();
    for f in hoptrace_record::explanation_files(&rec) {
        std::fs::rename(&f, rec.join(f.file_name().unwrap())).unwrap();
    }
    std::fs::remove_dir(rec.join("explain")).unwrap();
    let stages = hoptrace_record::read_explanations(&rec).unwrap();
    assert_eq!(stages.len() as u64, r.explained.stages);
    let json = d.path().join("report.json");
    assert_eq!(reported_explanations(&rec, &json), r.explained.stages);
    let trace = r.of("trace");
    let old_reading = reading().replace("rec/*.parquet", segments);
    let args = [trace.rows.to_string(), "trace".to_string()];
    python(&trace.home, &old_reading, READING_CHECKS, &args).unwrap();
    let explaining = explanations().replace("rec/explain/*.parquet", beside);
    python(
        &trace.home,
        &explaining,
        EXPLANATION_CHECKS,
        &explanation_args(&r),
    )
    .unwrap();
    // The documented glob itself mixes the two tables there: what the
    // folder is for.
    let mixed = python(&trace.home, &reading(), READING_CHECKS, &args);
    assert!(
        mixed.is_err(),
        "rec/*.parquet read the older layout as one table"
    );
}

/// After docs/watch.md's two SQL queries (`worst`, `who`) and its Python
/// block: rows per host and stream, the explained total, and every table
/// of the tree (`tables`: producer -> rows) read alone.
const ARCHIVE_CHECKS: &str = r#"
import sys, json
per_stream, total_ns, tables = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
root = sys.argv[4]
assert sorted((r[0], r[2], r[3]) for r in worst) == [
    (h, s, per_stream) for h in ("relay1", "relay2") for s in ("MU00", "MU01")], worst
assert all(r[4] == 20.0 for r in worst), worst
assert {r[0] for r in who} == {"relay1"}, who
assert abs(sum(r[3] for r in who) - total_ns / 1e6) < 1e-9, who
assert sorted(samples.rows()) == [
    (h, s, per_stream) for h in ("relay1", "relay2") for s in ("MU00", "MU01")], samples
assert abs(explained_ms.sum() - total_ns / 1e6) < 1e-9, explained_ms
for table, rows in tables.items():
    q = f"select count(*) from read_parquet('{root}/{table}/*/*/*.parquet', hive_partitioning = true)"
    n = duckdb.sql(q).fetchall()[0][0]
    assert n == rows, (table, n, rows)
    assert polars.scan_parquet(f"{root}/{table}/**/*.parquet", hive_partitioning=True).select(polars.len()).collect().item() == rows, table
"#;

#[test]
fn the_documented_archive_queries_read_one_table_per_producer_across_hosts() {
    if !python_ready("the_documented_archive_queries_read_one_table_per_producer") {
        return;
    }
    let d = TempDir::new("docs-queries-archive");
    let r = write_all(d.path());
    let root = d.path().join("tree");
    let mut args: Vec<String> = vec!["archive".into()];
    args.extend(r.made.iter().map(|m| {
        // `K/delivery` itself, not the link to it.
        std::fs::canonicalize(m.rec())
            .unwrap()
            .display()
            .to_string()
    }));
    args.extend(["--into".into(), root.display().to_string()]);
    let mut relay1 = args.clone();
    relay1.extend(["--host".into(), "relay1".into()]);
    let mut relay2 = vec![
        "archive".into(),
        r.of("sv-subscribe").rec().display().to_string(),
    ];
    relay2.extend(["--into".into(), root.display().to_string()]);
    relay2.extend(["--host".into(), "relay2".into()]);
    for a in [relay1, relay2] {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let out = hoptrace(&a);
        assert!(out.status.success(), "{}", show(&out));
    }
    let mut tables = serde_json::Map::new();
    for m in &r.made {
        let copies = if m.producer == "sv-subscribe" { 2 } else { 1 };
        tables.insert(m.producer.into(), (m.rows * copies).into());
    }
    tables.insert("explanations".into(), r.explained.parts.into());
    let from_root = |s: &str| s.replace("/srv/hoptrace", &root.display().to_string());
    let sql = from_root(&block("watch.md", "## Many hosts, many days", "sql"));
    let statements: Vec<&str> = sql
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    assert_eq!(statements.len(), 2, "{sql}");
    // A JSON string is a Python string literal.
    let literal = |s: &str| serde_json::Value::String(s.into()).to_string();
    let snippet = format!(
        "import duckdb, polars\nworst = duckdb.sql({}).fetchall()\nwho = duckdb.sql({}).fetchall()\n{}",
        literal(statements[0]),
        literal(statements[1]),
        from_root(&block("watch.md", "## Many hosts, many days", "python"))
    );
    let per_stream = r.of("sv-subscribe").rows / 2;
    python(
        d.path(),
        &snippet,
        ARCHIVE_CHECKS,
        &[
            per_stream.to_string(),
            r.explained.total_ns.to_string(),
            serde_json::Value::Object(tables).to_string(),
            root.display().to_string(),
        ],
    )
    .unwrap();
}
