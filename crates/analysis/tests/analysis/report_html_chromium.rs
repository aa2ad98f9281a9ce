//! Report end to end on a synthetic recording: figures, gate verdicts, exports,
//! and the HTML report: what its charts say (tick labels carry the unit of
//! their range, every text inside its chart, a legend naming every series,
//! where the time goes stacked per stage), rendered by headless Chromium
//! (not blank, in colour).

use std::path::Path;
use std::process::Command;

use hoptrace_analysis::analyzer::Config;
use hoptrace_analysis::report;
use hoptrace_analysis::synth::{write_synthetic, SynthSpec};

fn make(dir: &Path) -> Vec<Vec<i64>> {
    // 2 streams, 3 hops; stage 0 = 20us + (i % 7) us, stage 1 = 5us, except
    // row 1001 (stream 1, seq 500): stage 1 = 2 ms, row 7 stage 0 = -3 us
    let spec = SynthSpec {
        packets: 4000,
        streams: 2,
        hops: 3,
        rate: 4000,
        seed: 1,
    };
    let mut expect = vec![Vec::new(), Vec::new()];
    write_synthetic(dir, &spec, |i, st, _| {
        let v = match (i, st) {
            (7, 0) => -3_000,
            (1001, 1) => 2_000_000,
            (_, 0) => 20_000 + (i as i64 % 7) * 1000,
            _ => 5_000,
        };
        let _ = &mut expect;
        Some(v)
    })
    .unwrap();
    expect
}

#[test]
fn report_figures_gate_and_exports() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join("rec");
    make(&rec);
    let cfg = Config {
        thresholds: vec![1_000_000],
        ..Config::default()
    };
    let (rep, analyzers) =
        report::build(std::slice::from_ref(&rec), &cfg, Some(1_000_000), vec![]).unwrap();
    let run = &rep.runs[0];
    assert_eq!(run.streams.len(), 2);
    let s1 = &run.streams[1];
    assert_eq!(s1.name, "MU02");
    assert_eq!(s1.sequence.unique, 2000);
    assert_eq!(s1.sequence.lost, 0);
    // stages: h0..h1, h1..h2, h0..h2 (end to end)
    assert_eq!(run.stages.len(), 3);
    let e2e = &s1.stages[2].stats;
    assert_eq!(e2e.max_ns, Some(2_020_000));
    assert_eq!(e2e.max_packet.as_ref().unwrap().seq, 500);
    assert_eq!(e2e.above[0].count, 1);
    let s0 = &run.streams[1].stages[0].stats;
    assert_eq!(s0.negative_count, 1);
    assert_eq!(s0.min_ns, Some(-3_000));
    // pacing: 4000/s -> 250 us between samples of a stream
    assert_eq!(run.streams[0].pacing.min_ns, Some(250_000));
    assert_eq!(run.streams[0].pacing.max_ns, Some(250_000));
    let gate = rep.gate.as_ref().unwrap();
    assert!(!gate.passed);
    assert_eq!(gate.packets_over, 1);
    let (rep2, _) =
        report::build(std::slice::from_ref(&rec), &cfg, Some(3_000_000), vec![]).unwrap();
    assert!(rep2.gate.unwrap().passed);
    // warm-up: skipping 600 samples per stream removes the spike (seq 500)
    let cfg_w = Config {
        window: hoptrace_analysis::analyzer::Window {
            skip_warmup: 600,
            ..Default::default()
        },
        ..cfg.clone()
    };
    let (rep3, _) =
        report::build(std::slice::from_ref(&rec), &cfg_w, Some(1_000_000), vec![]).unwrap();
    assert!(rep3.gate.as_ref().unwrap().passed);
    assert_eq!(rep3.runs[0].streams[1].excluded, 600);
    assert_eq!(rep3.runs[0].streams[1].stages[2].stats.count, 1400);
    // JSON carries the schema version
    let json = serde_json::to_value(&rep).unwrap();
    assert_eq!(json["schema_version"], 1);
    // exports
    let csv = tmp.path().join("p.csv");
    let n = report::export::write_csv(&csv, &rec, &cfg).unwrap();
    assert_eq!(n, 4000);
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text
        .lines()
        .any(|l| l.starts_with("MU02,500,0,500,") && l.ends_with(",20000,2000000,2020000")));
    let hl = tmp.path().join("h.hlog");
    report::export::write_hdr_log(&hl, &analyzers[0]).unwrap();
    let bytes = std::fs::read(&hl).unwrap();
    let intervals: Vec<_> =
        hdrhistogram::serialization::interval_log::IntervalLogIterator::new(&bytes)
            .filter_map(|r| match r {
                Ok(hdrhistogram::serialization::interval_log::LogEntry::Interval(i)) => Some(i),
                _ => None,
            })
            .collect();
    assert_eq!(intervals.len(), 6);
    let mut de = hdrhistogram::serialization::Deserializer::new();
    let raw = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        intervals[5].encoded_histogram(),
    )
    .unwrap();
    let h: hdrhistogram::Histogram<u64> = de.deserialize(&mut std::io::Cursor::new(raw)).unwrap();
    assert_eq!(h.len(), 2000);
    let rj = tmp.path().join("rt.json");
    report::export::write_rt_json(&rj, &analyzers[0], &[]).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&rj).unwrap()).unwrap();
    assert_eq!(v["num_threads"], 6);
    assert_eq!(v["thread"]["0"]["cycles"], 2000);
    assert_eq!(v["thread"]["0"]["histogram"]["20"], 286);
}

/// A `<text>` of an SVG: where it is anchored and what it says.
#[derive(Debug)]
struct SvgText {
    x: f64,
    y: f64,
    text: String,
}

/// Each `<svg>` of `html`: its width, height and texts.
fn svg_texts(html: &str) -> Vec<(f64, f64, Vec<SvgText>)> {
    let attr = |tag: &str, name: &str| -> Option<f64> {
        let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        tag[at..].split('"').next()?.parse().ok()
    };
    html.split("<svg")
        .skip(1)
        .map(|svg| {
            let svg = svg.split("</svg>").next().unwrap();
            let head = svg.split('>').next().unwrap();
            let (w, h) = (attr(head, "width").unwrap(), attr(head, "height").unwrap());
            let texts = svg
                .split("<text")
                .skip(1)
                .map(|t| {
                    let (tag, rest) = t.split_once('>').unwrap();
                    SvgText {
                        x: attr(tag, "x").unwrap(),
                        y: attr(tag, "y").unwrap(),
                        text: rest.split("</text>").next().unwrap().trim().to_string(),
                    }
                })
                .collect();
            (w, h, texts)
        })
        .collect()
}

/// A tick label's number and unit (`2.5 ms` -> (2.5, "ms")), or None for
/// other texts.
fn tick(text: &str) -> Option<(f64, &str)> {
    let (n, unit) = text.split_once(' ').unwrap_or((text, ""));
    Some((n.parse().ok()?, unit))
}

/// The HTML report of [`make`]'s recording, written in `dir`: its path
/// and its text.
fn html_report(dir: &Path) -> (std::path::PathBuf, String) {
    let rec = dir.join("rec");
    make(&rec);
    let cfg = Config::default();
    let (rep, analyzers) =
        report::build(&[rec], &cfg, Some(1_000_000), vec!["hoptrace".into()]).unwrap();
    let html = dir.join("report.html");
    report::html::write_report(&html, &rep, &analyzers).unwrap();
    let text = std::fs::read_to_string(&html).unwrap();
    (html, text)
}

#[test]
fn html_charts_label_ticks_in_the_unit_of_their_range_and_name_every_series() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, text) = html_report(tmp.path());
    let charts = svg_texts(&text);
    // timeline, where the time goes, histogram, two percentile charts (the
    // 2 ms spike puts the tail more than two decades above the body).
    assert_eq!(charts.len(), 5, "charts drawn");
    for (w, h, texts) in &charts {
        let caption = &texts[0].text;
        for t in texts {
            assert!(
                (0.0..=*w).contains(&t.x) && (0.0..=*h).contains(&t.y),
                "{caption}: text {t:?} outside its {w}x{h} chart"
            );
            if let Some((v, unit)) = tick(&t.text) {
                let counts = caption.starts_with("histogram") && unit.is_empty();
                assert!(
                    counts || !unit.is_empty(),
                    "{caption}: tick {t:?} without a unit"
                );
                if ["ns", "us", "ms"].contains(&unit) {
                    assert!(v.abs() < 1000.0, "{caption}: {t:?} is in too small a unit");
                }
            }
        }
        let units = texts
            .iter()
            .filter(|t| tick(&t.text).is_some_and(|x| !x.1.is_empty()));
        assert!(units.count() >= 3, "{caption}: ticks with units");
    }
    // The latency axes reach the 2 ms spike: they count in ms.
    let timeline = &charts[0].2;
    assert!(timeline[0].text.starts_with("latency over time"));
    assert!(
        timeline.iter().any(|t| t.text == "latency (ms)"),
        "{timeline:?}"
    );
    assert!(timeline.iter().any(|t| t.text == "2 ms"), "{timeline:?}");
    // The percentile charts' tail axis names percentiles.
    assert!(charts[3].2.iter().any(|t| t.text == "p99"));
    // Where the time goes: one band per hop-to-hop stage.
    let breakdown = &charts[1].2;
    assert!(breakdown[0].text.starts_with("where the time goes"));
    let figures: Vec<&str> = text.split("<figure>").skip(1).collect();
    assert_eq!(figures.len(), 5);
    assert_eq!(
        figures[1].matches("<polygon").count(),
        2,
        "one band per stage"
    );
    for stage in ["h0..h1", "h1..h2"] {
        assert!(
            figures[1].contains(&format!("</span>{stage}</span>")),
            "legend {stage}"
        );
    }
    // Every other chart's legend (HTML under it, never cut) names both streams.
    for f in [0, 2, 3, 4] {
        let legend = figures[f].split("<div class=legend>").nth(1).unwrap();
        for stream in ["MU01", "MU02"] {
            assert!(
                legend.contains(&format!("</span>{stream}</span>")),
                "figure {f}: {stream}"
            );
        }
    }
}

#[test]
fn html_renders_in_headless_chromium() {
    let tmp = tempfile::tempdir().unwrap();
    let (html, text) = html_report(tmp.path());
    assert!(text.contains("<svg"));
    assert!(
        !text.contains("http://") || !text.contains("src=\"http"),
        "no external resources"
    );
    assert!(!text.contains("<script"));
    let chromium = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok());
    let Some(chromium) = chromium else {
        panic!("chromium is not installed (scripts/setup.sh installs it)");
    };
    let png = tmp.path().join("out.png");
    let profile = tmp.path().join("profile");
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
        ])
        .args([
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1280,2000")
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    assert!(
        png.exists(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if std::env::var("HOPTRACE_KEEP_SCREENSHOT").is_ok() {
        std::fs::copy(&png, "/tmp/hoptrace_report_screenshot.png").unwrap();
    }
    let decoder = png::Decoder::new(std::fs::File::open(&png).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let bytes = &buf[..info.buffer_size()];
    let channels = info.color_type.samples();
    let pixels = bytes.len() / channels;
    let non_white = bytes
        .chunks(channels)
        .filter(|p| p[..3].iter().any(|c| *c < 200))
        .count();
    let frac = non_white as f64 / pixels as f64;
    assert!(frac > 0.01 && frac < 0.9, "non-white fraction {frac}");
    let colored = bytes
        .chunks(channels)
        .filter(|p| p[0].abs_diff(p[2]) > 60)
        .count();
    assert!(colored > 500, "chart colours present: {colored}");
}
