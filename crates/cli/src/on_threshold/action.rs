//! `--on-threshold ACTION`: what to do when a frame's latency is over
//! `--threshold`, as rtla's `--on-threshold` (parsed here, run by
//! [`super::worker`]).
//!
//! - `pcap:N`: write a pcapng snippet of the N frames before the
//!   exceeding one, the frame itself and the N after it (1..=1000);
//! - `exec:CMD`: run `sh -c CMD` with the exceedance in its environment
//!   (`HOPTRACE_*`, see [`super::worker`]), not waited for;
//! - `signal:SIG` sends SIG (a name, `USR1` or `SIGUSR1`, or a number) to
//!   the parent process (rtla's `pid=parent`), `signal:SIG:PID` to PID;
//! - `stop`: end the run once the exceedance is handled.
//!
//! Each is refused with an error naming what is wrong ([`ActionError`]).

use std::fmt;
use std::str::FromStr;

/// Most frames `pcap:N` keeps on each side of an exceeding frame.
pub const MAX_PCAP_FRAMES: usize = 1000;

/// One `--on-threshold` action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Keep N frames before and N after the exceeding one.
    Pcap { frames: usize },
    /// `sh -c CMD`.
    Exec(String),
    /// Send `signal` (its name kept for messages) to `target`.
    Signal {
        signal: i32,
        name: String,
        target: SignalTarget,
    },
    /// End the run.
    Stop,
}

/// Where `signal:` sends its signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalTarget {
    /// The process that started hoptrace (rtla's `pid=parent`).
    Parent,
    Pid(i32),
}

/// What is wrong with an `--on-threshold` action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionError {
    /// `pcap:` with no whole number of frames in 1..=1000.
    PcapFrames(String),
    /// `exec:` with nothing to run.
    EmptyCommand,
    /// `signal:` with a signal that is not known.
    Signal(String),
    /// `signal:SIG:PID` with a PID that is not a positive number.
    Pid(String),
    /// Not one of the actions.
    Unknown(String),
}

impl fmt::Display for ActionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ActionError::PcapFrames(n) => write!(
                f,
                "pcap:{n}: give the frames to keep before and after the exceeding one, a whole number 1..={MAX_PCAP_FRAMES} (e.g. pcap:20)"
            ),
            ActionError::EmptyCommand => {
                write!(f, "exec: needs a command to run with sh -c (e.g. exec:'logger late')")
            }
            ActionError::Signal(s) => write!(
                f,
                "signal:{s}: not a signal; give a name (USR1, SIGUSR1, TERM, ...) or a number 1..64, optionally :PID (default: the parent process)"
            ),
            ActionError::Pid(p) => write!(f, "signal:SIG:{p}: the PID is not a positive whole number"),
            ActionError::Unknown(a) => write!(
                f,
                "{a:?} is not an action: use pcap:N, exec:CMD, signal:SIG[:PID] or stop"
            ),
        }
    }
}

impl std::error::Error for ActionError {}

/// Signals by name (without `SIG`).
const SIGNALS: &[(&str, i32)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ABRT", libc::SIGABRT),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("USR2", libc::SIGUSR2),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("WINCH", libc::SIGWINCH),
];

/// A signal by name (`USR1`, `SIGUSR1`, any case) or number (1..=64).
fn parse_signal(s: &str) -> Result<(i32, String), ActionError> {
    if let Ok(n) = s.parse::<i32>() {
        return if (1..=64).contains(&n) {
            Ok((n, n.to_string()))
        } else {
            Err(ActionError::Signal(s.into()))
        };
    }
    let upper = s.to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    SIGNALS
        .iter()
        .find(|(name, _)| *name == bare)
        .map(|&(name, n)| (n, format!("SIG{name}")))
        .ok_or_else(|| ActionError::Signal(s.into()))
}

impl FromStr for Action {
    type Err = ActionError;

    fn from_str(s: &str) -> Result<Self, ActionError> {
        if s == "stop" {
            return Ok(Action::Stop);
        }
        let Some((kind, rest)) = s.split_once(':') else {
            return Err(ActionError::Unknown(s.into()));
        };
        match kind {
            "pcap" => match rest.parse::<usize>() {
                Ok(n) if (1..=MAX_PCAP_FRAMES).contains(&n) => Ok(Action::Pcap { frames: n }),
                _ => Err(ActionError::PcapFrames(rest.into())),
            },
            "exec" if rest.trim().is_empty() => Err(ActionError::EmptyCommand),
            "exec" => Ok(Action::Exec(rest.into())),
            "signal" => {
                let (sig, pid) = match rest.split_once(':') {
                    Some((sig, pid)) => (sig, Some(pid)),
                    None => (rest, None),
                };
                let (signal, name) = parse_signal(sig)?;
                let target = match pid {
                    None => SignalTarget::Parent,
                    Some(p) => match p.parse::<i32>() {
                        Ok(n) if n > 0 => SignalTarget::Pid(n),
                        _ => return Err(ActionError::Pid(p.into())),
                    },
                };
                Ok(Action::Signal {
                    signal,
                    name,
                    target,
                })
            }
            _ => Err(ActionError::Unknown(s.into())),
        }
    }
}

/// The actions of one run, checked together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// `pcap:N`'s N (None: no snippets).
    pub pcap: Option<usize>,
    pub exec: Vec<String>,
    pub signals: Vec<(i32, String, SignalTarget)>,
    pub stop: bool,
}

impl Plan {
    /// The actions given (`pcap:` and `stop` at most once).
    pub fn new(actions: &[Action]) -> Result<Plan, String> {
        let mut plan = Plan::default();
        for a in actions {
            match a {
                Action::Pcap { frames } => {
                    if plan.pcap.replace(*frames).is_some() {
                        return Err("--on-threshold pcap:N is given twice: give it once".into());
                    }
                }
                Action::Exec(cmd) => plan.exec.push(cmd.clone()),
                Action::Signal {
                    signal,
                    name,
                    target,
                } => plan.signals.push((*signal, name.clone(), *target)),
                Action::Stop => plan.stop = true,
            }
        }
        Ok(plan)
    }

    /// Frames kept before (and after) an exceeding one: `pcap:N`'s N, or
    /// none (the exceeding frame alone, for the other actions).
    pub fn window(&self) -> usize {
        self.pcap.unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_parses_and_a_signal_goes_to_the_parent_unless_a_pid_is_given() {
        assert_eq!("pcap:20".parse(), Ok(Action::Pcap { frames: 20 }));
        assert_eq!("stop".parse(), Ok(Action::Stop));
        assert_eq!(
            "exec:echo late: $HOPTRACE_SMPCNT".parse(),
            Ok(Action::Exec("echo late: $HOPTRACE_SMPCNT".into()))
        );
        assert_eq!(
            "signal:usr1".parse(),
            Ok(Action::Signal {
                signal: libc::SIGUSR1,
                name: "SIGUSR1".into(),
                target: SignalTarget::Parent
            })
        );
        assert_eq!(
            "signal:SIGTERM:1234".parse(),
            Ok(Action::Signal {
                signal: libc::SIGTERM,
                name: "SIGTERM".into(),
                target: SignalTarget::Pid(1234)
            })
        );
        assert_eq!(
            "signal:10"
                .parse::<Action>()
                .map(|a| matches!(a, Action::Signal { signal: 10, .. })),
            Ok(true)
        );
    }

    #[test]
    fn a_bad_action_is_refused_with_what_is_wrong() {
        let err = |s: &str| s.parse::<Action>().unwrap_err();
        assert_eq!(err("pcap:x"), ActionError::PcapFrames("x".into()));
        assert_eq!(err("pcap:0"), ActionError::PcapFrames("0".into()));
        assert_eq!(err("pcap:1001"), ActionError::PcapFrames("1001".into()));
        assert_eq!(err("pcap"), ActionError::Unknown("pcap".into()));
        assert_eq!(err("exec:  "), ActionError::EmptyCommand);
        assert_eq!(err("signal:FOO"), ActionError::Signal("FOO".into()));
        assert_eq!(err("signal:65"), ActionError::Signal("65".into()));
        assert_eq!(err("signal:USR1:-3"), ActionError::Pid("-3".into()));
        assert_eq!(err("reboot"), ActionError::Unknown("reboot".into()));
        assert_eq!(err("mail:ops"), ActionError::Unknown("mail:ops".into()));
        assert!(err("pcap:x").to_string().contains("1..=1000"));
        assert!(err("reboot").to_string().contains("pcap:N, exec:CMD"));
    }

    #[test]
    fn a_plan_takes_one_pcap_and_any_number_of_commands() {
        let p = Plan::new(&[
            Action::Pcap { frames: 5 },
            Action::Exec("a".into()),
            Action::Exec("b".into()),
            Action::Stop,
        ])
        .unwrap();
        assert_eq!(
            (p.pcap, p.exec.len(), p.stop, p.window()),
            (Some(5), 2, true, 5)
        );
        assert_eq!(Plan::new(&[Action::Stop]).unwrap().window(), 0);
        let twice = Plan::new(&[Action::Pcap { frames: 5 }, Action::Pcap { frames: 6 }]);
        assert!(twice.unwrap_err().contains("twice"));
    }
}
