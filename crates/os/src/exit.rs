//! The exit statuses of every hoptrace command: one table, so a script can
//! tell a typo from a failed gate from data that was only partly there.
//!
//! `hoptrace` returns [`Exit::code`] of the first that applies, in this
//! order: a usage error (the command did nothing), an error (it could not
//! finish), then the verdicts of a command that ran to the end: a gate it
//! was given failed (a limit exceeded in the data read is exceeded however
//! much is missing), the result covers only part of the input (which
//! leaves any other verdict uncertain), the streams were not the
//! configured ones. The lab reads its children's statuses
//! through the same table ([`Exit::from_code`]). docs/exit-codes.md is
//! the user's copy of this table; `hoptrace --help` points to it.

/// One exit status of the table. See the module docs for the order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Exit {
    /// 0: the command did its job; every gate it was given passed.
    Ok = 0,
    /// 1: the command could not do its job: an unreadable recording,
    /// capture or SCL file, no kvm tracepoints (`kvm`), a clock exchange
    /// without an estimate (`clock host`), a lab run whose own checks
    /// failed, a permission or I/O error.
    Error = 1,
    /// 2: the command line is wrong and nothing was done: an unknown flag,
    /// a bad value or a missing argument (clap's errors), or a refusal
    /// before anything ran (an output directory that is not empty or is an
    /// input, a flag that does nothing for this topology).
    Usage = 2,
    /// 3: a gate failed: a limit given on the command line was exceeded
    /// (`report --max-latency`, `ping --max-latency`, `doctor --strict`).
    GateFailed = 3,
    /// 4: the streams are not the configured ones (`--expect-streams` of
    /// `sv subscribe`, `trace` and `report`: missing, unexpected, another
    /// rate or field; `--expect-blocks` of `goose subscribe` and `goose
    /// dump`: a GOOSE control block missing, unexpected or differing from
    /// the SCL file).
    StreamsDiffer = 4,
    /// 5: the result covers only part of the input: events were lost
    /// (`trace`, `kvm`), frames were malformed or the capture was cut
    /// (`sv dump`), control blocks could not be read (`sv scl`), or a
    /// gated `report` read a recording with unreadable segments (without
    /// `--allow-partial`).
    Partial = 5,
}

impl Exit {
    /// Every status, in code order.
    pub const ALL: [Exit; 6] = [
        Exit::Ok,
        Exit::Error,
        Exit::Usage,
        Exit::GateFailed,
        Exit::StreamsDiffer,
        Exit::Partial,
    ];

    /// The process exit status.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The status of `code`, as another hoptrace process returned it
    /// (None for a status outside the table, e.g. 130 after SIGINT).
    pub fn from_code(code: i32) -> Option<Exit> {
        Exit::ALL.into_iter().find(|e| i32::from(e.code()) == code)
    }

    /// Its name in the table: `ok`, `error`, `usage`, `gate failed`,
    /// `streams differ`, `partial data`.
    pub const fn name(self) -> &'static str {
        match self {
            Exit::Ok => "ok",
            Exit::Error => "error",
            Exit::Usage => "usage",
            Exit::GateFailed => "gate failed",
            Exit::StreamsDiffer => "streams differ",
            Exit::Partial => "partial data",
        }
    }

    /// One line for `--help`: `0 ok, 1 error, 2 usage, ...`.
    pub fn summary() -> String {
        let parts: Vec<String> = Exit::ALL
            .iter()
            .map(|e| format!("{} {}", e.code(), e.name()))
            .collect();
        parts.join(", ")
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_its_own_code_and_reads_back() {
        for (i, e) in Exit::ALL.iter().enumerate() {
            assert_eq!(usize::from(e.code()), i);
            assert_eq!(Exit::from_code(i32::from(e.code())), Some(*e));
        }
        assert_eq!(Exit::from_code(130), None);
        assert_eq!(
            Exit::summary(),
            "0 ok, 1 error, 2 usage, 3 gate failed, 4 streams differ, 5 partial data"
        );
    }
}
