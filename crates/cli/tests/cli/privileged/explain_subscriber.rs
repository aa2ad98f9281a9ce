//! `sv subscribe --explain` against a known interference: the subscriber
//! is pinned to one CPU and, while SV flows to it over a veth pair, the
//! SCHED_FIFO spinner of `explain_cli` (`hthog`, 4 ms every 50 ms) spins
//! on that CPU. The subscriber's own late stages (`rx..app`, T3 to T4) are
//! held to the same account as the tracer's consumer stages there
//! ([`super::explain_cli::check_explanations`]): the spinner's part lies
//! between the time it measured itself spinning inside the stage and the
//! time it could have held the CPU (each within 10 % + 20 us, with the
//! same allowance for steal and for switches the kernel did not report);
//! it is the largest part where its spin covers half of the stage; the
//! parts add up; after it stopped no explanation names it. Every
//! explanation is of the receiving thread, whose id the recording's
//! metadata holds, and is on the recording's clock (CLOCK_REALTIME; the
//! spinner's account is moved there from CLOCK_TAI by the TAI offset).

use std::time::Duration;

use super::explain_cli::{check_explanations, now_ns, Spinner};
use crate::endpoints_common::{args, pair, run_ok, start_ready, ScratchDir};

#[test]
fn a_fifo_spinner_on_the_subscribers_cpu_is_named_as_the_cause_of_every_late_rx_to_app_stage_it_overlaps(
) {
    if !hoptrace_netns::require_privileges(
        "a_fifo_spinner_on_the_subscribers_cpu_is_named_as_the_cause_of_every_late_rx_to_app_stage_it_overlaps",
    ) {
        return;
    }
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    assert!(
        ncpu >= 2,
        "the test needs 2 CPUs (publisher and subscriber apart)"
    );
    let sub_cpu = ncpu - 1;
    let p = pair("exs");
    let dir = ScratchDir::new("exs");
    let rec = dir.path().join("sub");
    let sub_args = format!(
        "sv subscribe --iface vb --duration 8s --cpu {sub_cpu} --explain 1ms --record {}",
        rec.display()
    );
    let sub = start_ready(&p.b, &args(&sub_args));
    let publish = |samples: &str| {
        run_ok(
            &p.a,
            &args(&format!(
                "sv publish --iface va --cpu 0 --streams 2 --rate 4000 --samples {samples}"
            )),
        )
    };

    let spinner = Spinner::start(sub_cpu);
    publish("8000");
    let (bursts, hog_tid) = spinner.stop();
    let hog_end = now_ns(libc::CLOCK_TAI);
    std::thread::sleep(Duration::from_millis(300));
    publish("4000");
    let said = sub.stderr_log.clone();
    let (st, out) = sub.finish(Duration::from_secs(60));
    let said = said.lock().unwrap().join("\n");
    assert!(st.success(), "{out}\n{said}");
    assert!(
        said.contains("explained "),
        "the summary counts the explained stages: {said}"
    );
    let line = said
        .lines()
        .find(|l| l.starts_with("explain ") && l.contains("hthog/"))
        .unwrap_or_else(|| panic!("no explanation line names the spinner: {said}"));
    eprintln!("{line}");

    check_endpoint_recording(
        &rec,
        ("receiver_tid", "the receiving thread"),
        "rx..app",
        &bursts,
        hog_end,
        hog_tid,
    );
}

/// The explanations an endpoint stored in its recording `rec` for its own
/// `stage`, held to the spinner's account (`bursts` until `hog_end`, on
/// CLOCK_TAI; spinner thread `hog_tid`): every one is of the thread whose id
/// the metadata holds under `tid_key` (`thread` names it), at least ten lie
/// mostly inside a burst, and the recording's report names the spinner
/// among the culprits. The recording is on CLOCK_REALTIME: the account is
/// moved there by the TAI offset.
pub(crate) fn check_endpoint_recording(
    rec: &std::path::Path,
    (tid_key, thread): (&str, &str),
    stage: &str,
    bursts: &[super::explain_cli::Burst],
    hog_end: u64,
    hog_tid: i32,
) {
    let reader = hoptrace_record::RecordingReader::open(rec).unwrap();
    let extra = &reader.meta().extra;
    let tid = extra[tid_key]
        .as_u64()
        .unwrap_or_else(|| panic!("extra.{tid_key} in {extra}"));
    let hog_name = format!("hthog/{hog_tid} (FIFO 50)");
    let all = hoptrace_record::read_explanations(rec).unwrap();
    assert!(
        all.iter()
            .all(|e| e.stage == stage && e.task.contains(&format!("/{tid}"))),
        "every explanation is of {thread} {tid}: {:?}",
        all.first()
    );
    let tai_offset = (now_ns(libc::CLOCK_TAI) - now_ns(libc::CLOCK_REALTIME) + 500_000_000)
        / 1_000_000_000
        * 1_000_000_000;
    let bursts: Vec<_> = bursts.iter().map(|b| b.earlier_by(tai_offset)).collect();
    let (overlapping, hidden) =
        check_explanations(&all, &bursts, hog_end - tai_offset, &hog_name, stage);
    eprintln!(
        "{} explanations, {overlapping} {stage} stages mostly inside a burst, {hidden} with a switch the kernel did not report, {} bursts",
        all.len(),
        bursts.len()
    );
    assert!(
        overlapping >= 10,
        "{overlapping} explained {stage} stages are mostly inside the {} bursts ({} explanations)",
        bursts.len(),
        all.len()
    );
    let text = crate::analysis_common::hoptrace(&["report", rec.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("culprits (over all explained spikes)") && text.contains(&hog_name),
        "{text}"
    );
}
