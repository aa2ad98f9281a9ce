//! The supervisor's journal, `DIR/journal.jsonl`: one JSON event a line,
//! appended and fsynced as it happens, never rewritten.
//!
//! Mechanism: every change the supervisor makes or sees (campaign start,
//! a component started with its pid, a component's exit with its status,
//! an injected fault, a doctor snapshot, a resume after the supervisor
//! itself was gone, the end) is one [`Event`]. [`Journal::append`] writes
//! the line and fsyncs before the supervisor acts on it, so that after a
//! kill or a reboot the journal holds everything up to the moment.
//! [`replay`] folds the lines back into a [`JournalState`]: how many runs
//! each component had, its restarts, and its gaps (from an unexpected
//! exit to the next start; for a supervisor that was gone, from the last
//! heartbeat it wrote to the resume). A last line cut by the kill is
//! skipped and counted, never an error; any other bad line is an error
//! naming its number (the journal is the campaign's record: a damaged one
//! is said, not guessed around).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The journal's file name in the campaign directory.
pub const JOURNAL: &str = "journal.jsonl";

/// One journal line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The campaign began (once per campaign).
    CampaignStart { at_ns: i64, duration_ns: i64 },
    /// The supervisor came back into the directory; it was last alive at
    /// `last_seen_ns` (its last heartbeat or journal line).
    Resume { at_ns: i64, last_seen_ns: i64 },
    /// A component's run `run` started as process `pid`.
    Start {
        at_ns: i64,
        component: String,
        run: u32,
        pid: u32,
    },
    /// A component's process ended; `expected` when the supervisor stopped it.
    Exit {
        at_ns: i64,
        component: String,
        run: u32,
        status: String,
        expected: bool,
    },
    /// A fault of the plan was injected.
    Fault {
        at_ns: i64,
        component: String,
        action: String,
        pid: u32,
    },
    /// A link fault set `component`'s interface `iface` down (`up`
    /// false) or up again.
    Link {
        at_ns: i64,
        component: String,
        iface: String,
        up: bool,
    },
    /// A doctor snapshot was written to `file` (relative to DIR).
    Doctor {
        at_ns: i64,
        label: String,
        file: String,
        status: String,
    },
    /// The measurement ended (`reason`: the duration was reached, a signal).
    Stop {
        at_ns: i64,
        reason: String,
        complete: bool,
    },
}

impl Event {
    /// When it happened (ns, CLOCK_REALTIME).
    pub fn at_ns(&self) -> i64 {
        match self {
            Event::CampaignStart { at_ns, .. }
            | Event::Resume { at_ns, .. }
            | Event::Start { at_ns, .. }
            | Event::Exit { at_ns, .. }
            | Event::Fault { at_ns, .. }
            | Event::Link { at_ns, .. }
            | Event::Doctor { at_ns, .. }
            | Event::Stop { at_ns, .. } => *at_ns,
        }
    }
}

/// What is wrong with a journal.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} line {line}: not a journal event ({reason}); the journal is damaged: keep it, and start a new campaign directory")]
    BadLine {
        path: String,
        line: usize,
        reason: String,
    },
    #[error("{path}: holds no campaign_start event: not a campaign journal")]
    NoStart { path: String },
}

/// The open journal, appending.
pub struct Journal {
    file: std::fs::File,
    path: String,
}

impl Journal {
    /// Open (create) `DIR/journal.jsonl` for appending.
    pub fn open(dir: &Path) -> Result<Self, JournalError> {
        let path = dir.join(JOURNAL);
        let p = path.display().to_string();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|source| JournalError::Io {
                path: p.clone(),
                source,
            })?;
        Ok(Journal { file, path: p })
    }

    /// Append `event` and fsync it.
    pub fn append(&mut self, event: &Event) -> Result<(), JournalError> {
        let mut line = serde_json::to_string(event).expect("an event serializes");
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|_| self.file.sync_data())
            .map_err(|source| JournalError::Io {
                path: self.path.clone(),
                source,
            })
    }
}

/// A time a component was not running while the campaign was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gap {
    pub component: String,
    /// From its death (or the supervisor's last sign of life) ...
    pub from_ns: i64,
    /// ... to its next start; None: it never started again.
    pub to_ns: Option<i64>,
    /// Why: the exit status, or `supervisor gone`.
    pub cause: String,
}

/// A time a link fault held an interface down.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outage {
    pub component: String,
    pub iface: String,
    /// From the link set down ...
    pub from_ns: i64,
    /// ... to it set up again; None: not (yet) up again.
    pub to_ns: Option<i64>,
}

/// One component's history.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ComponentHistory {
    /// Runs started (the next run's number).
    pub runs: u32,
    /// Runs started after an unexpected exit or a resume.
    pub restarts: u32,
    /// Unexpected exits.
    pub deaths: u32,
    /// Whether its last run is running (no exit seen).
    pub running: bool,
    /// Pid of the last run.
    pub pid: Option<u32>,
    /// Statuses of the runs that ended, in order.
    pub exits: Vec<String>,
}

/// The journal folded.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct JournalState {
    pub start_ns: i64,
    pub duration_ns: i64,
    pub components: BTreeMap<String, ComponentHistory>,
    pub gaps: Vec<Gap>,
    /// Injected faults: (time, component, action).
    pub faults: Vec<(i64, String, String)>,
    /// Link faults: the times an interface was held down.
    pub outages: Vec<Outage>,
    /// Doctor snapshots: (time, label, file, status).
    pub doctors: Vec<(i64, String, String, String)>,
    /// Resumes of the supervisor: (at, last seen).
    pub resumes: Vec<(i64, i64)>,
    /// The last event's time.
    pub last_ns: i64,
    /// The stop, if the measurement ended: (time, reason, complete).
    pub stop: Option<(i64, String, bool)>,
    /// A last line cut by a kill, skipped.
    pub cut_last_line: bool,
}

impl JournalState {
    /// The campaign's planned end (ns).
    pub fn end_ns(&self) -> i64 {
        self.start_ns.saturating_add(self.duration_ns)
    }

    /// Fold one event in.
    pub fn apply(&mut self, e: &Event) {
        self.last_ns = self.last_ns.max(e.at_ns());
        match e {
            Event::CampaignStart { at_ns, duration_ns } => {
                self.start_ns = *at_ns;
                self.duration_ns = *duration_ns;
            }
            Event::Resume {
                at_ns,
                last_seen_ns,
            } => {
                self.resumes.push((*at_ns, *last_seen_ns));
                for (name, h) in &mut self.components {
                    if h.running {
                        h.running = false;
                        h.deaths += 1;
                        self.gaps.push(Gap {
                            component: name.clone(),
                            from_ns: *last_seen_ns,
                            to_ns: None,
                            cause: "supervisor gone".into(),
                        });
                    }
                }
            }
            Event::Start {
                at_ns,
                component,
                run,
                pid,
            } => {
                let h = self.components.entry(component.clone()).or_default();
                if *run > 0 {
                    h.restarts += 1;
                }
                h.runs = h.runs.max(run + 1);
                h.running = true;
                h.pid = Some(*pid);
                if let Some(g) = self
                    .gaps
                    .iter_mut()
                    .rev()
                    .find(|g| &g.component == component && g.to_ns.is_none())
                {
                    g.to_ns = Some(*at_ns);
                }
            }
            Event::Exit {
                at_ns,
                component,
                status,
                expected,
                ..
            } => {
                let h = self.components.entry(component.clone()).or_default();
                h.running = false;
                h.exits.push(status.clone());
                if !expected {
                    h.deaths += 1;
                    self.gaps.push(Gap {
                        component: component.clone(),
                        from_ns: *at_ns,
                        to_ns: None,
                        cause: status.clone(),
                    });
                }
            }
            Event::Fault {
                at_ns,
                component,
                action,
                ..
            } => self
                .faults
                .push((*at_ns, component.clone(), action.clone())),
            Event::Link {
                at_ns,
                component,
                iface,
                up: false,
            } => self.outages.push(Outage {
                component: component.clone(),
                iface: iface.clone(),
                from_ns: *at_ns,
                to_ns: None,
            }),
            Event::Link {
                at_ns,
                component,
                up: true,
                ..
            } => {
                if let Some(o) = self
                    .outages
                    .iter_mut()
                    .rev()
                    .find(|o| &o.component == component && o.to_ns.is_none())
                {
                    o.to_ns = Some(*at_ns);
                }
            }
            Event::Doctor {
                at_ns,
                label,
                file,
                status,
            } => self
                .doctors
                .push((*at_ns, label.clone(), file.clone(), status.clone())),
            Event::Stop {
                at_ns,
                reason,
                complete,
            } => {
                self.stop = Some((*at_ns, reason.clone(), *complete));
            }
        }
    }
}

/// Fold the journal text `text` (of `path`, for the errors) into its state.
pub fn replay_text(text: &str, path: &str) -> Result<JournalState, JournalError> {
    let mut state = JournalState::default();
    let mut started = false;
    let lines: Vec<&str> = text.split('\n').collect();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Event>(line) {
            Ok(e) => {
                started |= matches!(e, Event::CampaignStart { .. });
                state.apply(&e);
            }
            // The last line without its newline: cut by a kill mid-write.
            Err(_) if i + 1 == lines.len() => state.cut_last_line = true,
            Err(err) => {
                return Err(JournalError::BadLine {
                    path: path.to_string(),
                    line: i + 1,
                    reason: err.to_string(),
                })
            }
        }
    }
    if !started {
        return Err(JournalError::NoStart {
            path: path.to_string(),
        });
    }
    Ok(state)
}

/// Read and fold `DIR/journal.jsonl`.
pub fn replay(dir: &Path) -> Result<JournalState, JournalError> {
    let path = dir.join(JOURNAL);
    let p = path.display().to_string();
    let text = std::fs::read_to_string(&path).map_err(|source| JournalError::Io {
        path: p.clone(),
        source,
    })?;
    replay_text(&text, &p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(at: i64, c: &str, run: u32) -> Event {
        Event::Start {
            at_ns: at,
            component: c.into(),
            run,
            pid: 100 + run,
        }
    }
    fn exit(at: i64, c: &str, run: u32, expected: bool) -> Event {
        Event::Exit {
            at_ns: at,
            component: c.into(),
            run,
            status: "signal 9".into(),
            expected,
        }
    }

    fn lines(events: &[Event]) -> String {
        events
            .iter()
            .map(|e| serde_json::to_string(e).unwrap() + "\n")
            .collect()
    }

    #[test]
    fn a_death_and_its_restart_are_one_gap_and_one_restart() {
        let text = lines(&[
            Event::CampaignStart {
                at_ns: 0,
                duration_ns: 20,
            },
            start(1, "subscriber", 0),
            start(1, "publisher", 0),
            exit(8, "subscriber", 0, false),
            start(9, "subscriber", 1),
            exit(20, "publisher", 0, true),
            exit(20, "subscriber", 1, true),
            Event::Stop {
                at_ns: 20,
                reason: "duration reached".into(),
                complete: true,
            },
        ]);
        let s = replay_text(&text, "j").unwrap();
        let sub = &s.components["subscriber"];
        assert_eq!(
            (sub.runs, sub.restarts, sub.deaths, sub.running),
            (2, 1, 1, false)
        );
        assert_eq!(s.components["publisher"].restarts, 0);
        assert_eq!(
            s.gaps,
            [Gap {
                component: "subscriber".into(),
                from_ns: 8,
                to_ns: Some(9),
                cause: "signal 9".into()
            }]
        );
        assert_eq!(s.stop, Some((20, "duration reached".into(), true)));
        assert_eq!(s.end_ns(), 20);
    }

    #[test]
    fn a_resume_after_the_supervisor_died_makes_a_gap_for_every_running_component() {
        let text = lines(&[
            Event::CampaignStart {
                at_ns: 0,
                duration_ns: 100,
            },
            start(1, "subscriber", 0),
            start(1, "cyclictest", 0),
            exit(5, "cyclictest", 0, true),
            Event::Resume {
                at_ns: 30,
                last_seen_ns: 12,
            },
            start(31, "subscriber", 1),
        ]);
        let s = replay_text(&text, "j").unwrap();
        assert_eq!(s.resumes, [(30, 12)]);
        assert_eq!(s.gaps.len(), 1, "{:?}", s.gaps);
        assert_eq!((s.gaps[0].from_ns, s.gaps[0].to_ns), (12, Some(31)));
        assert_eq!(s.gaps[0].cause, "supervisor gone");
        assert!(s.components["subscriber"].running);
        assert_eq!(s.components["subscriber"].runs, 2);
        assert!(s.stop.is_none());
    }

    #[test]
    fn a_link_set_down_then_up_is_one_outage_and_no_death() {
        let link = |at_ns, up| Event::Link {
            at_ns,
            component: "subscriber".into(),
            iface: "vb".into(),
            up,
        };
        let text = lines(&[
            Event::CampaignStart {
                at_ns: 0,
                duration_ns: 100,
            },
            start(1, "subscriber", 0),
            link(40, false),
            link(55, true),
            link(70, false),
        ]);
        let s = replay_text(&text, "j").unwrap();
        let o = |from_ns, to_ns| Outage {
            component: "subscriber".into(),
            iface: "vb".into(),
            from_ns,
            to_ns,
        };
        assert_eq!(s.outages, [o(40, Some(55)), o(70, None)]);
        assert!(s.gaps.is_empty());
        assert_eq!(s.components["subscriber"].deaths, 0);
    }

    #[test]
    fn a_last_line_cut_by_a_kill_is_skipped_and_a_damaged_middle_line_is_refused() {
        let mut text = lines(&[
            Event::CampaignStart {
                at_ns: 0,
                duration_ns: 1,
            },
            start(1, "subscriber", 0),
        ]);
        text.push_str("{\"event\":\"exit\",\"at_");
        let s = replay_text(&text, "j").unwrap();
        assert!(s.cut_last_line && s.components["subscriber"].running);
        let bad = "{\"event\":\"campaign_start\",\"at_ns\":0,\"duration_ns\":1}\nnot json\n{}\n";
        let e = replay_text(bad, "DIR/journal.jsonl")
            .unwrap_err()
            .to_string();
        assert!(e.contains("DIR/journal.jsonl line 2"), "{e}");
        let e = replay_text("", "j").unwrap_err().to_string();
        assert!(e.contains("no campaign_start"), "{e}");
    }

    #[test]
    fn appended_events_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path()).unwrap();
        j.append(&Event::CampaignStart {
            at_ns: 5,
            duration_ns: 10,
        })
        .unwrap();
        j.append(&start(6, "stress-ng", 0)).unwrap();
        drop(j);
        let mut j = Journal::open(dir.path()).unwrap();
        j.append(&exit(7, "stress-ng", 0, false)).unwrap();
        let s = replay(dir.path()).unwrap();
        assert_eq!(s.start_ns, 5);
        assert_eq!(s.components["stress-ng"].deaths, 1);
        assert_eq!(s.last_ns, 7);
    }
}
