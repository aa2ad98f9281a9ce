//! `sv publish --explain` against a known interference: the publisher is
//! pinned to one CPU and, while it sends two SV streams at 4000/s on a veth,
//! the SCHED_FIFO spinner of `explain_cli` (`hthog`, 4 ms every 50 ms)
//! spins on that CPU for the first part of the run. An instant that falls
//! in a burst is sent when the burst ends (the sending thread is runnable
//! behind the spinner), so its `sched..tx` (the scheduled instant to the
//! kernel's TX stamp) is late. Those stages are held to the same account as
//! the tracer's and the subscriber's
//! ([`super::explain_cli::check_explanations`]): the spinner's part lies
//! between the time it measured itself spinning inside the stage and the
//! time it could have held the CPU; it is the largest part where its spin
//! covers half of the stage; the parts add up; after it stopped no
//! explanation names it. Every explanation is of the sending thread,
//! whose id the recording's metadata holds, stored in the recording's
//! `explain/` on its clock (CLOCK_REALTIME; the spinner's account is moved
//! there from CLOCK_TAI by the TAI offset); the report names the spinner
//! among the culprits.

use std::time::Duration;

use super::explain_cli::{check_explanations, now_ns, Spinner};
use crate::endpoints_common::{args, pair, start, ScratchDir};

#[test]
fn a_fifo_spinner_on_the_publishers_cpu_is_named_as_the_cause_of_every_late_schedule_to_tx_stage_it_overlaps(
) {
    if !hoptrace_netns::require_privileges(
        "a_fifo_spinner_on_the_publishers_cpu_is_named_as_the_cause_of_every_late_schedule_to_tx_stage_it_overlaps",
    ) {
        return;
    }
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    assert!(
        ncpu >= 2,
        "the test needs 2 CPUs (the spinner's and the rest)"
    );
    let pub_cpu = ncpu - 1;
    let p = pair("exp");
    let dir = ScratchDir::new("exp");
    let rec = dir.path().join("pub");
    // 5 s of samples: the spinner spins through the first 2.5 s of them.
    let publisher = start(
        &p.a,
        &args(&format!(
            "sv publish --iface va --cpu {pub_cpu} --streams 2 --rate 4000 --samples 20000 --explain 1ms --record {}",
            rec.display()
        )),
    );
    // Said once the flight recorder records, before the first instant.
    publisher.wait_for("publishing 2 stream(s)", Duration::from_secs(30));
    let spinner = Spinner::start(pub_cpu);
    std::thread::sleep(Duration::from_millis(2500));
    let (bursts, hog_tid) = spinner.stop();
    let hog_end = now_ns(libc::CLOCK_TAI);
    let said = publisher.stderr_log.clone();
    let (st, out) = publisher.finish(Duration::from_secs(60));
    let said = said.lock().unwrap().join("\n");
    assert!(st.success(), "{out}\n{said}");
    assert!(
        said.contains(": stage sched..tx of the sending thread, CPU flight recorder on ")
            && said.contains("explained "),
        "the start note and the summary: {said}"
    );
    let line = said
        .lines()
        .find(|l| l.starts_with("explain ") && l.contains(" sched..tx ") && l.contains("hthog/"))
        .unwrap_or_else(|| panic!("no explanation line names the spinner: {said}"));
    eprintln!("{line}");

    let reader = hoptrace_record::RecordingReader::open(&rec).unwrap();
    let extra = &reader.meta().extra;
    let tid = extra["sender_tid"]
        .as_u64()
        .unwrap_or_else(|| panic!("extra.sender_tid in {extra}"));
    let hog_name = format!("hthog/{hog_tid} (FIFO 50)");
    let all = hoptrace_record::read_explanations(&rec).unwrap();
    assert!(
        all.iter()
            .all(|e| e.stage == "sched..tx" && e.task.contains(&format!("/{tid}"))),
        "every explanation is of the sending thread {tid}: {:?}",
        all.first()
    );
    // The publisher's recording and its explanations are on
    // CLOCK_REALTIME, the spinner's account on CLOCK_TAI.
    let tai_offset = (now_ns(libc::CLOCK_TAI) - now_ns(libc::CLOCK_REALTIME) + 500_000_000)
        / 1_000_000_000
        * 1_000_000_000;
    let bursts: Vec<_> = bursts.iter().map(|b| b.earlier_by(tai_offset)).collect();
    let (overlapping, hidden) =
        check_explanations(&all, &bursts, hog_end - tai_offset, &hog_name, "sched..tx");
    eprintln!(
        "{} explanations, {overlapping} sched..tx stages mostly inside a burst, {hidden} with a switch the kernel did not report, {} bursts",
        all.len(),
        bursts.len()
    );
    // About 50 bursts, each making one instant (two samples) late.
    assert!(
        overlapping >= 10,
        "{overlapping} explained sched..tx stages are mostly inside the {} bursts ({} explanations)",
        bursts.len(),
        all.len()
    );
    // The report of the recording names the spinner among the culprits.
    let text = crate::analysis_common::hoptrace(&["report", rec.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("culprits (over all explained spikes)") && text.contains(&hog_name),
        "{text}"
    );
}
