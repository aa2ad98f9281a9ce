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

use super::explain_cli::{now_ns, Spinner};
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

    // About 50 bursts, each making one instant (two samples) late.
    super::explain_subscriber::check_endpoint_recording(
        &rec,
        ("sender_tid", "the sending thread"),
        "sched..tx",
        &bursts,
        hog_end,
        hog_tid,
    );
}
