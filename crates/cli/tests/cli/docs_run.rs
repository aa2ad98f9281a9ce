//! Docs that run: every `hoptrace` command shown in a shell block of the
//! README or of `docs/*.md` is run by a test, or says why it cannot be.
//!
//! The commands are read as the parser test reads them
//! (`src/doc_commands/extract.rs`, included here; that test,
//! `every_hoptrace_command_shown_in_the_readme_and_the_docs_is_accepted_by_the_parser`,
//! parses every one with the binary's clap tree). [`COVERAGE`] then puts
//! each command in one of three classes, by its document and the start of
//! its words (the first entry that matches wins):
//!
//! - [`Runs::Here`]: run by this file, offline, on fixtures, with the
//!   statuses it may exit with. The commands of a code block run in its
//!   order in one scratch directory (so `goose pcap -o trips.pcap` writes
//!   what the next line's `goose dump trips.pcap` reads), with the names
//!   the docs use mapped to fixtures by [`Fixtures`] (its table is the
//!   mapping);
//! - [`Runs::Test`]: needs root, a lab or a VM: the privileged test named
//!   runs it. The test must exist, and its source (with the script of its
//!   lab where it runs the command there, [`DRIVES`]) must pass the
//!   command's subcommand and every flag the command shows, except the
//!   flags the entry lists as not passed (said, not hidden). The commands of the
//!   README's tour block belong to `the_readme_tour_runs_as_written`, which
//!   runs the block as written;
//! - [`Runs::ParsedOnly`]: cannot run in a test (a live terminal view, a
//!   host's NIC or KVM), with the reason.
//!
//! A documented command in no class, or an entry no command matches, fails
//! the classification test, naming the file and line.

use crate::analysis_common::{write_recording, Pkt};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[path = "../../src/doc_commands/extract.rs"]
mod extract;

use extract::{commands_in, documents, DocCommand, VAR};

const BIN: &str = env!("CARGO_BIN_EXE_hoptrace");

/// Where a documented command is run.
#[derive(Debug, Clone, Copy)]
enum Runs {
    /// Here, offline, on fixtures; the exit statuses it may end with (3:
    /// a gate the fixture fails, 4: streams that differ from a file).
    Here(&'static [i32]),
    /// By this privileged test (`module::privileged::name` or
    /// `privileged::module::name`), passing every flag shown but these.
    Test(&'static str, &'static [&'static str]),
    /// Nowhere: why not.
    ParsedOnly(&'static str),
}

use Runs::{Here, ParsedOnly, Test};

const CAMPAIGN: &str = "privileged::campaign::a_campaign_restarts_the_killed_subscriber_once_keeps_it_through_a_link_down_and_its_report_accounts_for_every_sample_with_cyclictest_and_stress_ng_beside";
const TOUR: &str = "readme_tour::privileged::the_readme_tour_runs_as_written";
const LAB_VM: &str = "privileged::lab_vm::vm_lab_boots_carries_sv_into_the_guest_and_goes_down";
const KVM: &str = "privileged::kvm_cli::the_nested_lab_counts_exactly_the_exits_the_workload_causes_and_agrees_with_perf";
const KVM_NESTED: &str = "privileged::kvm_nested::a_guest_hypervisor_in_the_nested_lab_causes_exactly_the_nested_exits_its_guest_executes";
const GOOSE_WIRE: &str =
    "privileged::goose_wire::every_goose_message_published_on_the_scheme_is_heard_once_in_order";
const GOOSE_SCL_WIRE: &str = "privileged::goose_wire::a_block_published_from_its_scl_file_is_received_as_configured_and_the_others_are_missing";
const GOOSE_RECORD: &str = "privileged::goose_record::a_recorded_subscription_has_a_row_per_message_the_held_message_as_its_one_tal_expiry_and_metrics_equal_to_the_rows";
const RELAY_WIRE: &str = "privileged::relay_wire::every_fault_is_tripped_on_its_first_sample_above_the_pickup_and_heard_as_a_goose_state_change";
const VM_LIBVIRT: &str = "privileged::vm_libvirt::vm_show_resolves_a_libvirt_domain_and_doctor_vm_finds_a_vcpu_moved_off_its_pin";
const TRACE_VM: &str = "privileged::vm_libvirt::trace_vm_traces_the_domains_path_with_the_counts_of_the_interfaces_named_by_hand";
const JOIN_VM: &str = "privileged::join_vm::join_vm_measures_the_guest_clock_through_the_vms_clock_port_and_maps_every_guest_row";
const VM_QEMU: &str = "privileged::vm_qemu::vm_show_resolves_a_qemu_process_by_its_name_through_qmp_or_its_thread_names";
const TRACE_VM_QEMU: &str =
    "privileged::vm_qemu::trace_vm_traces_a_qemu_processs_path_in_its_own_network_namespace";
const OBSERVE: &str = "privileged::doctor_observe::observe_names_the_device_irq_and_the_task_that_ran_on_a_cpu_declared_isolated";
const ROUND_TRIP: &str = "privileged::round_trip::every_rtt_across_the_bridge_splits_into_outbound_turnaround_and_return_and_a_reflector_hold_lands_in_the_turnaround";
const EXPLAIN_SUB: &str = "privileged::explain_subscriber::a_fifo_spinner_on_the_subscribers_cpu_is_named_as_the_cause_of_every_late_rx_to_app_stage_it_overlaps";
const ON_THRESHOLD_SUB: &str = "privileged::on_threshold_sv::frames_held_past_the_threshold_are_each_kept_once_in_a_snippet_tshark_reads_with_their_stamps_and_explained";
const EXPLAIN_PUB: &str = "privileged::explain_publisher::a_fifo_spinner_on_the_publishers_cpu_is_named_as_the_cause_of_every_late_schedule_to_tx_stage_it_overlaps";
const XDP_PING: &str = "privileged::endpoints_xdp::xdp_ping_and_reflect_answer_every_request_once";
const XDP_SUB: &str =
    "privileged::endpoints_xdp::an_xdp_subscriber_receives_every_tagged_frame_and_detaches_on_exit";
const BUSY_PING: &str =
    "privileged::endpoints_xdp::busy_poll_ping_and_reflect_answer_every_request_once";
const SCL_SUBSCRIBER: &str = "sv_scl_streams::privileged::a_subscriber_configured_from_the_scl_file_finds_every_stream_and_names_exactly_what_differs";

/// (document, start of the command's words, where it runs). Words as the
/// extraction gives them: `$T` is [`VAR`].
const COVERAGE: &[(&str, &str, Runs)] = &[
    ("README.md", "hoptrace --version", Here(&[0])),
    ("campaign.md", "hoptrace campaign run", Test(CAMPAIGN, &[])),
    ("campaign.md", "hoptrace campaign report", Test(CAMPAIGN, &[])),
    ("README.md", "hoptrace lab run vm", Test(LAB_VM, &[])),
    ("README.md", "hoptrace report /tmp/doc/run-vm/chain", Test(LAB_VM, &[])),
    ("README.md", "hoptrace lab compare --topologies bridge,vm", Test(LAB_VM, &[])),
    ("README.md", "hoptrace clock estimate", Test(LAB_VM, &[])),
    ("README.md", "hoptrace lab run kvm", Test(KVM, &[])),
    ("doctor.md", "hoptrace doctor --netns", Test(TOUR, &[])),
    ("doctor.md", "hoptrace doctor --vm", Test(VM_LIBVIRT, &[])),
    ("doctor.md", "hoptrace doctor --observe", Test(OBSERVE, &[])),
    ("vms.md", "hoptrace vm show relay2", Test(VM_QEMU, &[])),
    ("vms.md", "hoptrace clock host --vm", Test(VM_QEMU, &[])),
    ("vms.md", "hoptrace join", Test(JOIN_VM, &["--guest-trace", "--host-trace"])),
    ("vms.md", "hoptrace trace --vm relay2", Test(TRACE_VM_QEMU, &[])),
    ("vms.md", "hoptrace vm show", Test(VM_LIBVIRT, &[])),
    ("vms.md", "hoptrace trace --vm", Test(TRACE_VM, &[])),
    ("kvm.md", "hoptrace kvm --vm", Test(VM_LIBVIRT, &[])),
    (
        "doctor.md",
        "hoptrace doctor --iface enp3s0",
        ParsedOnly("a NIC and the processes (QEMU, a subscriber) of the reader's host"),
    ),
    ("explain.md", "hoptrace sv subscribe", Test(EXPLAIN_SUB, &[])),
    ("endpoints.md", "hoptrace sv subscribe --iface vb --record sub --threshold", Test(ON_THRESHOLD_SUB, &[])),
    ("explain.md", "hoptrace sv publish", Test(EXPLAIN_PUB, &[])),
    ("doctor.md", "hoptrace doctor --strict", Here(&[0, 3])),
    ("doctor.md", "hoptrace doctor", Here(&[0])),
    ("vms.md", "hoptrace doctor --domain-xml", Here(&[0])),
    ("exit-codes.md", "hoptrace report rec --max-latency", Here(&[0, 3])),
    ("goose.md", "hoptrace goose pcap", Here(&[0])),
    ("goose.md", "hoptrace goose dump", Here(&[0])),
    ("goose.md", "hoptrace goose subscribe --iface eth1 --scl", Test(GOOSE_SCL_WIRE, &[])),
    (
        "goose.md",
        "hoptrace goose publish --iface eth0 --scl",
        Test(GOOSE_SCL_WIRE, &["--ied", "--change-every"]),
    ),
    ("goose.md", "hoptrace goose subscribe --iface eth1 --record", Test(GOOSE_RECORD, &[])),
    ("goose.md", "hoptrace report goose-rec", Test(GOOSE_RECORD, &[])),
    ("goose.md", "hoptrace goose subscribe --iface eth1", Test(GOOSE_WIRE, &[])),
    (
        "goose.md",
        "hoptrace goose publish --iface eth0",
        Test(GOOSE_WIRE, &["--change-every"]),
    ),
    ("goose.md", "hoptrace relay", Test(RELAY_WIRE, &[])),
    ("goose.md", "hoptrace sv publish", Test(RELAY_WIRE, &[])),
    ("goose.md", "hoptrace goose subscribe --iface eth0 --json", Test(RELAY_WIRE, &[])),
    ("goose.md", "hoptrace sample-to-trip", Test(RELAY_WIRE, &[])),
    (
        "kvm.md",
        "hoptrace kvm --list-reasons",
        ParsedOnly("reads the kvm module's tracepoint formats: a KVM host"),
    ),
    ("kvm.md", "hoptrace kvm --pid", Test(KVM, &[])),
    ("kvm.md", "hoptrace kvm --plain", Test(KVM, &[])),
    ("kvm.md", "hoptrace kvm --record", Test(KVM, &[])),
    (
        "kvm.md",
        "hoptrace kvm delivery",
        ParsedOnly("joins a trace and a `kvm --delivery` recording of a KVM host; `lab run kvm` joins its own with the same code"),
    ),
    ("kvm.md", "hoptrace lab run kvm --nested", Test(KVM_NESTED, &[])),
    ("kvm.md", "hoptrace lab", Test(KVM, &[])),
    ("kvm.md", "hoptrace kvm guest-hypervisor", Test(KVM_NESTED, &[])),
    ("kvm.md", "hoptrace kvm --nested", Test(KVM_NESTED, &[])),
    (
        "kvm.md",
        "hoptrace kvm",
        ParsedOnly("the live view needs a terminal (`kvm --plain` runs in the nested lab)"),
    ),
    ("lab.md", "hoptrace lab run bridge --duration 5s --load", Test("privileged::lab_topologies::udp_load_crosses_the_same_switch", &[])),
    ("lab.md", "hoptrace lab run bridge --duration 5s --faults", Test("privileged::lab_relay::every_fault_of_a_lab_run_is_tripped_and_its_trip_comes_back_through_the_switch", &[])),
    ("lab.md", "hoptrace lab compare", Test("privileged::lab_topologies::compare_gives_a_row_per_topology_and_stage", &[])),
    ("lab.md", "hoptrace lab up vm", Test(LAB_VM, &[])),
    ("lab.md", "hoptrace lab exec vm1", Test(LAB_VM, &[])),
    ("lab.md", "hoptrace lab run vm", Test(LAB_VM, &[])),
    ("lab.md", "hoptrace lab down vm1", Test(LAB_VM, &[])),
    // The tour runs these as lab.md shows them (another lab name).
    ("lab.md", "hoptrace lab up bridge", Test(TOUR, &[])),
    ("lab.md", "hoptrace lab status", Test(TOUR, &[])),
    ("lab.md", "hoptrace lab exec demo", Test(TOUR, &[])),
    ("lab.md", "hoptrace lab down demo", Test(TOUR, &[])),
    ("lab.md", "hoptrace sv", Test(TOUR, &[])),
    ("metrics.md", "hoptrace sv subscribe", Test("privileged::metrics_sv::a_scrape_during_a_run_counts_every_sample_and_exactly_the_injected_loss", &[])),
    ("metrics.md", "hoptrace trace", Test("privileged::metrics_trace::a_scrape_during_a_lab_trace_counts_every_frame_per_stream_and_stage", &[])),
    ("scl.md", "hoptrace sv scl", Here(&[0])),
    ("scl.md", "hoptrace sv pcap", Here(&[0])),
    ("scl.md", "hoptrace sv publish", Test(SCL_SUBSCRIBER, &[])),
    ("scl.md", "hoptrace sv subscribe", Test(SCL_SUBSCRIBER, &[])),
    ("scl.md", "hoptrace trace", Test("trace_cli::privileged::trace_with_an_scl_file_keeps_its_streams_and_names_the_missing_and_unexpected_ones", &[])),
    ("scl.md", "hoptrace report REC", Here(&[0, 4])),
    // The test's spinning reflector is not pinned nor made SCHED_FIFO: on
    // a shared 2-CPU test host a FIFO spinner would starve the others.
    ("endpoints.md", "hoptrace reflect --iface vb --busy-poll", Test(BUSY_PING, &["--cpu", "--fifo"])),
    ("endpoints.md", "hoptrace ping --iface va --busy-poll", Test(BUSY_PING, &[])),
    ("endpoints.md", "hoptrace reflect --iface vb --xdp", Test(XDP_PING, &[])),
    ("endpoints.md", "hoptrace ping --iface va --xdp", Test(XDP_PING, &[])),
    ("endpoints.md", "hoptrace sv subscribe --iface vb --xdp", Test(XDP_SUB, &[])),
    ("hops.md", "hoptrace lab up bridge --name rt", Test(ROUND_TRIP, &[])),
    ("hops.md", "hoptrace trace --plain --netns ht-rt-hyp", Test(ROUND_TRIP, &[])),
    ("hops.md", "hoptrace reflect --iface eth0", Test(ROUND_TRIP, &[])),
    ("hops.md", "hoptrace lab exec rt pub", Test(ROUND_TRIP, &[])),
    ("hops.md", "hoptrace ping --iface eth0", Test(ROUND_TRIP, &[])),
    ("hops.md", "hoptrace round-trip", Test(ROUND_TRIP, &[])),
    (
        "watch.md",
        "hoptrace sv subscribe",
        ParsedOnly("a relay host's deployment (eth1, CPU 3, /var/lib): deploy_units runs the unit's own command line"),
    ),
];

/// The entry of a command: its index in [`COVERAGE`] and where it runs.
fn class_of(c: &DocCommand, tour: std::ops::Range<usize>) -> Option<(usize, Runs)> {
    if c.file == "README.md" && tour.contains(&c.line) {
        return Some((usize::MAX, Test(TOUR, &[])));
    }
    let text = c.words.join(" ");
    COVERAGE
        .iter()
        .enumerate()
        .find_map(|(i, (file, start, runs))| {
            (c.file == *file && (text == *start || text.starts_with(&format!("{start} "))))
                .then_some((i, *runs))
        })
}

/// The lines of the README's tour block (`the_readme_tour_runs_as_written`
/// runs it as written).
fn tour_lines(readme: &str) -> std::ops::Range<usize> {
    let lines: Vec<&str> = readme.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.starts_with("## A 5-minute tour"))
        .expect("the README has its tour");
    let open = head + lines[head..].iter().position(|l| *l == "```sh").unwrap();
    let close = open + 1 + lines[open + 1..].iter().position(|l| *l == "```").unwrap();
    // 1-based line numbers of the block's contents
    open + 2..close + 1
}

/// Tests that run documented commands through a script of their lab, and
/// the files of that script (read with the test's own for its words).
const DRIVES: &[(&str, &[&str])] = &[
    (KVM, &["../lab/src/nested/mod.rs"]),
    (KVM_NESTED, &["../lab/src/nested/nested_run.rs"]),
    // Its tracer is vm_libvirt's `Tracer` (`trace --record DIR`).
    (TRACE_VM_QEMU, &["tests/cli/privileged/vm_libvirt.rs"]),
];

/// The file of the privileged test `path`, and its function's name.
fn test_source(path: &str) -> (PathBuf, &str) {
    let parts: Vec<&str> = path.split("::").collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli");
    match parts.as_slice() {
        ["privileged", module, name] => (dir.join(format!("privileged/{module}.rs")), *name),
        [module, "privileged", name] => (dir.join(format!("{module}.rs")), *name),
        _ => panic!("`{path}` is not a privileged test's path"),
    }
}

/// Whether `src` passes `word` as an argument (a string literal holding
/// it as a whole word).
fn passes(src: &str, word: &str) -> bool {
    src.match_indices(word).any(|(i, _)| {
        let before = src[..i].chars().next_back();
        let after = src[i + word.len()..].chars().next();
        matches!(before, Some('"' | ' '))
            && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

/// What is wrong with `runs` as the place of `c` (None: nothing).
fn check_test(c: &DocCommand, test: &str, not_passed: &[&str], tour_block: &str) -> Option<String> {
    let (file, name) = test_source(test);
    let src = std::fs::read_to_string(&file).unwrap_or_default();
    if !src.contains(&format!("fn {name}(")) {
        return Some(format!(
            "names the test `{test}`, which {} does not hold",
            file.display()
        ));
    }
    // The tour test runs the README's block: its words are the block's.
    let mut src = if test == TOUR {
        tour_block.to_string()
    } else {
        src
    };
    for (_, files) in DRIVES.iter().filter(|(t, _)| *t == test) {
        for f in *files {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(f);
            src.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
    let src = src.as_str();
    let sub = c.words.get(1).map(String::as_str).unwrap_or_default();
    let missing: Vec<&str> = std::iter::once(sub)
        .chain(
            c.words
                .iter()
                .filter(|w| w.starts_with("--") && w.len() > 2)
                .map(|w| w.split('=').next().unwrap()),
        )
        .filter(|w| !not_passed.contains(w) && !passes(src, w))
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "names `{test}`, whose source does not pass {} (list them as not passed if it cannot)",
            missing.join(", ")
        )
    })
}

fn all_commands() -> Vec<DocCommand> {
    documents()
        .iter()
        .flat_map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            commands_in(&name, &std::fs::read_to_string(p).unwrap())
        })
        .collect()
}

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).unwrap()
}

#[test]
fn every_documented_command_runs_here_or_in_a_named_privileged_test_or_says_why_not() {
    let readme = readme();
    let tour = tour_lines(&readme);
    let tour_block: String = readme
        .lines()
        .skip(tour.start - 1)
        .take(tour.len())
        .collect::<Vec<_>>()
        .join("\n");
    let commands = all_commands();
    let mut problems = Vec::new();
    let mut used = vec![false; COVERAGE.len()];
    let mut counts = BTreeMap::<&str, usize>::new();
    for c in &commands {
        let shown = format!("{}: `{}`", c.place(), c.words.join(" "));
        let Some((i, runs)) = class_of(c, tour.clone()) else {
            problems.push(format!(
                "{shown} is run nowhere: add it to COVERAGE (run here, a privileged test, or why not)"
            ));
            continue;
        };
        if let Some(u) = used.get_mut(i) {
            *u = true;
        }
        match runs {
            Here(_) => *counts.entry("run here").or_default() += 1,
            ParsedOnly(why) => {
                *counts.entry("parsed only").or_default() += 1;
                eprintln!("{shown}: parsed only: {why}");
                if why.trim().is_empty() {
                    problems.push(format!("{shown} is parsed only, without a reason"));
                }
            }
            Test(test, not_passed) => {
                *counts.entry("privileged test").or_default() += 1;
                if let Some(p) = check_test(c, test, not_passed, &tour_block) {
                    problems.push(format!("{shown} {p}"));
                }
            }
        }
    }
    for (i, u) in used.iter().enumerate() {
        if !u {
            let (file, start, _) = COVERAGE[i];
            problems.push(format!(
                "COVERAGE entry {file} `{start}` matches no documented command"
            ));
        }
    }
    eprintln!("{} documented commands: {counts:?}", commands.len());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        commands.len() >= 60,
        "only {} commands found",
        commands.len()
    );
}

/// The inputs the docs name, as files of the repository (relative to it):
/// the docs' name -> the fixture copied under that name into the scratch
/// directory. Besides these: `rec` and `REC` are a recording this file
/// writes (two streams, hops `a`, `b`, `c`), [`VAR`] (the README's `$T`)
/// is the scratch directory itself, `/mnt/image` an empty directory (a
/// root with nothing in it), and a command fed by `virsh dumpxml` reads
/// `relay1.xml` on its standard input.
const FIXTURES: &[(&str, &str)] = &[
    ("station.scd", "crates/scl/tests/fixtures/station.scd"),
    ("relay.cid", "crates/scl/tests/fixtures/relay.cid"),
    ("relay1.xml", "crates/vm/tests/fixtures/rhel9rt-rt.xml"),
];

/// A scratch directory holding [`FIXTURES`] and the recordings.
struct Fixtures {
    dir: tempfile::TempDir,
}

impl Fixtures {
    fn new() -> Fixtures {
        let dir = tempfile::tempdir().unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for (name, source) in FIXTURES {
            std::fs::copy(root.join(source), dir.path().join(name))
                .unwrap_or_else(|e| panic!("fixture {source}: {e}"));
        }
        let pkts: Vec<Pkt> = (0..2000u64)
            .map(|i| {
                let t =
                    crate::analysis_common::T0 + (i / 2) as i64 * crate::analysis_common::PERIOD;
                Pkt {
                    stream: format!("S{}", i % 2),
                    seq: i / 2,
                    hops: vec![
                        Some(t),
                        Some(t + 20_000 + (i as i64 % 7) * 1_000),
                        Some(t + 90_000),
                    ],
                }
            })
            .collect();
        for name in ["rec", "REC"] {
            write_recording(&dir.path().join(name), &["a", "b", "c"], &pkts);
        }
        std::fs::create_dir(dir.path().join("image")).unwrap();
        Fixtures { dir }
    }

    /// `word` with the docs' placeholders replaced.
    fn word(&self, word: &str) -> String {
        let d = self.dir.path().display();
        if word == "/mnt/image" {
            format!("{d}/image")
        } else if let Some(rest) = word.strip_prefix(VAR) {
            format!("{d}{rest}")
        } else {
            word.to_string()
        }
    }

    /// Run `c` as the document shows it: its status and what it said.
    fn run(&self, c: &DocCommand) -> (Option<i32>, String) {
        let args: Vec<String> = c.words[1..].iter().map(|w| self.word(w)).collect();
        let stdin = match c.piped_from.as_deref() {
            Some("virsh") => {
                Stdio::from(std::fs::File::open(self.dir.path().join("relay1.xml")).unwrap())
            }
            Some(other) => panic!(
                "{}: no fixture stands for the output of `{other}`",
                c.place()
            ),
            None => Stdio::null(),
        };
        let out = Command::new(BIN)
            .args(&args)
            .current_dir(self.dir.path())
            .stdin(stdin)
            .output()
            .expect("run hoptrace");
        let said = String::from_utf8_lossy(&out.stderr);
        let said: Vec<&str> = said.lines().take(6).collect();
        (out.status.code(), said.join("\n"))
    }
}

/// Run every [`Runs::Here`] command of `commands` (one document, in its
/// order; each code block in a scratch directory of its own): the
/// failures, each with its place.
fn run_here(commands: &[DocCommand], tour: std::ops::Range<usize>) -> (usize, Vec<String>) {
    let mut fixtures: Option<(usize, Fixtures)> = None;
    let mut ran = 0;
    let mut failed = Vec::new();
    for c in commands {
        let Some((_, Here(codes))) = class_of(c, tour.clone()) else {
            continue;
        };
        if fixtures.as_ref().is_none_or(|f| f.0 != c.block) {
            fixtures = Some((c.block, Fixtures::new()));
        }
        let fixtures = &fixtures.as_ref().unwrap().1;
        ran += 1;
        let (code, said) = fixtures.run(c);
        if !code.is_some_and(|x| codes.contains(&x)) {
            failed.push(format!(
                "{}: `{}` exited {code:?} (documented to give {codes:?}):\n{said}",
                c.place(),
                c.words.join(" ")
            ));
        }
    }
    (ran, failed)
}

#[test]
fn every_documented_command_that_runs_offline_runs_on_the_fixtures() {
    let tour = tour_lines(&readme());
    let mut ran = 0;
    let mut failed = Vec::new();
    for path in documents() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let commands = commands_in(&name, &std::fs::read_to_string(&path).unwrap());
        let (n, f) = run_here(&commands, tour.clone());
        ran += n;
        failed.extend(f);
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
    assert!(ran >= 25, "only {ran} documented commands ran");
}

#[test]
fn a_documented_command_with_a_flag_that_does_not_exist_or_a_wrong_input_fails_the_run() {
    // goose.md as it could be written wrong: a flag that does not exist,
    // and a capture read before any line writes it.
    let md =
        "```sh\nhoptrace goose pcap -o trips.pcap --duration 1s --change-at 1s --no-such-flag\n\
              hoptrace goose dump trips.pcap\n```\n";
    let commands = commands_in("goose.md", md);
    let (ran, failed) = run_here(&commands, 0..0);
    assert_eq!(ran, 2);
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(
        failed[0].starts_with("goose.md:2: `hoptrace goose pcap") && failed[0].contains("Some(2)"),
        "{}",
        failed[0]
    );
    assert!(
        failed[1].starts_with("goose.md:3: `hoptrace goose dump trips.pcap` exited Some(1)"),
        "{}",
        failed[1]
    );
    // And a command in no class is named.
    let cs = commands_in("goose.md", "```sh\nhoptrace archive x y\n```\n");
    assert!(class_of(&cs[0], 0..0).is_none());
}
