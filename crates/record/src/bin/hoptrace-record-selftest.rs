//! Test helper for `tests/sigkill.rs`: appends rows to a recording forever
//! with a short rotation period and prints `closed <n>` each time a segment
//! is closed, so the test can SIGKILL it mid-run and check what survived.
//!
//! Usage: `hoptrace-record-selftest <dir> <rotate_ms>`. Rows: stream `s<k>`
//! for k in 0..4, `seq` increasing by one per stream, hop `t_a` = seq.

use std::io::Write;
use std::time::Duration;

use hoptrace_record::{
    ClockDomain, HopColumn, PacketRowRef, PacketStatus, RecordingMeta, RecordingWriter,
    RotatePolicy, StampSource,
};

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: hoptrace-record-selftest <dir> <rotate_ms>");
        return std::process::ExitCode::from(2);
    }
    let Ok(ms) = args[2].parse::<u64>() else {
        eprintln!("rotate_ms must be a number, got {:?}", args[2]);
        return std::process::ExitCode::from(2);
    };
    let hops = vec![
        HopColumn::new(
            "a",
            ClockDomain::Monotonic,
            StampSource::Application,
            "selftest",
        ),
        HopColumn::new(
            "b",
            ClockDomain::Monotonic,
            StampSource::Application,
            "selftest",
        ),
    ];
    let meta = RecordingMeta::for_this_host("record-selftest", hops);
    let policy = RotatePolicy {
        max_age: Duration::from_millis(ms),
        row_group_rows: 500,
        ..RotatePolicy::default()
    };
    let mut w = match RecordingWriter::create(&args[1], meta, policy) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("{e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let names = ["s0", "s1", "s2", "s3"];
    let mut seq = 0u64;
    let mut reported = 0;
    let stdout = std::io::stdout();
    loop {
        for _ in 0..250 {
            for name in names {
                let t = seq as i64;
                let hops = [Some(t), Some(t + 7)];
                let row = PacketRowRef {
                    stream: name,
                    dst_mac: None,
                    app_id: None,
                    smp_cnt: Some((seq % 4000) as u16),
                    epoch: Some((seq / 4000) as u32),
                    seq,
                    dest: None,
                    status: PacketStatus::Ok,
                    drop_reason: None,
                    drop_hop: None,
                    hops: &hops,
                    extra: &[],
                };
                if let Err(e) = w.append_ref(row) {
                    eprintln!("{e}");
                    return std::process::ExitCode::FAILURE;
                }
            }
            seq += 1;
        }
        if w.segments_closed() != reported {
            reported = w.segments_closed();
            let mut out = stdout.lock();
            let _ = writeln!(out, "closed {reported}");
            let _ = out.flush();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
