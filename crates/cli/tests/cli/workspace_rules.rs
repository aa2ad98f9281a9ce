//! The workspace's dependency rules (README, "Layout"), read from `cargo
//! metadata`: a crate that takes a dependency the rules forbid fails here,
//! naming the rule and the crate.

use std::collections::{BTreeMap, BTreeSet};

/// crate -> the project crates it depends on (normal dependencies; dev
/// and build dependencies are not part of what ships).
fn project_deps() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    m["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|n| n.starts_with("hoptrace"))
                .map(String::from)
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

/// Every project crate `name` depends on, directly or not.
fn closure(deps: &BTreeMap<String, BTreeSet<String>>, name: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![name.to_string()];
    while let Some(n) = todo.pop() {
        for d in deps.get(&n).into_iter().flatten() {
            if seen.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    seen
}

/// The rules, each as (what it says, the crates it is about, the project
/// crates they may reach, directly or not).
fn rules() -> Vec<(&'static str, Vec<&'static str>, Vec<&'static str>)> {
    vec![
        (
            "the codec, the units and the file formats depend on nothing of the project",
            vec![
                "hoptrace-units",
                "hoptrace-sv",
                "hoptrace-pcap",
                "hoptrace-record",
                "hoptrace-dump",
                "hoptrace-exit-reasons",
                "hoptrace-bpf-build",
                "hoptrace-kernel-abi",
                "hoptrace-netns",
                "hoptrace-vm",
            ],
            vec![],
        ),
        (
            "analysis depends on recordings only (it runs on a laptop, without BPF, root or a network interface)",
            vec!["hoptrace-analysis"],
            vec!["hoptrace-record", "hoptrace-sv", "hoptrace-pcap", "hoptrace-units"],
        ),
        (
            "the clock alignment and the chain join recordings, nothing that loads BPF",
            vec!["hoptrace-clocksync", "hoptrace-chain"],
            vec!["hoptrace-record", "hoptrace-units", "hoptrace-clocksync"],
        ),
        (
            "the BPF crates (probes, CPU flight recorder, kvm) know nothing of the engine, analysis, endpoints, the lab or the CLI",
            vec!["hoptrace-probes", "hoptrace-cpu", "hoptrace-kvm"],
            vec![
                "hoptrace-os",
                "hoptrace-netns",
                "hoptrace-kernel-abi",
                "hoptrace-record",
                "hoptrace-units",
                "hoptrace-exit-reasons",
            ],
        ),
        (
            "the trace engine builds on the probes and knows nothing of analysis, endpoints, the lab or the CLI",
            vec!["hoptrace-trace"],
            vec![
                "hoptrace-probes",
                "hoptrace-cpu",
                "hoptrace-dump",
                "hoptrace-metrics",
                "hoptrace-exit-reasons",
                "hoptrace-kernel-abi",
                "hoptrace-os",
                "hoptrace-netns",
                "hoptrace-record",
                "hoptrace-sv",
                "hoptrace-units",
            ],
        ),
    ]
}

#[test]
fn every_crate_depends_only_on_what_the_layout_allows() {
    let deps = project_deps();
    let mut broken = Vec::new();
    for (rule, crates, allowed) in rules() {
        for c in crates {
            assert!(deps.contains_key(c), "no crate {c} in the workspace");
            for d in closure(&deps, c) {
                if !allowed.contains(&d.as_str()) {
                    broken.push(format!("{c} depends on {d}: {rule}"));
                }
            }
        }
    }
    // Only the CLI depends on the lab, and nothing on the CLI.
    for (c, ds) in &deps {
        if c != "hoptrace" && ds.contains("hoptrace-lab") {
            broken.push(format!(
                "{c} depends on hoptrace-lab: only the CLI depends on the lab"
            ));
        }
        if ds.contains("hoptrace") {
            broken.push(format!("{c} depends on the CLI (hoptrace): nothing does"));
        }
    }
    assert!(
        broken.is_empty(),
        "dependency rules broken:\n{}",
        broken.join("\n")
    );
}
