//! Expected streams: what a subscriber configured with streams (from SCL or
//! a config file) checks on every sample, as a relay would.
//!
//! A relay is configured with the streams it subscribes to. It ignores a
//! frame whose destination MAC, APPID and svID name no configured stream,
//! and drops or flags one whose confRev, datSet, noASDU, VLAN, sample rate,
//! simulation bit or security field differ from the configuration. A
//! subscriber given the same configuration counts, per stream:
//!
//! - **missing**: a configured stream of which no sample arrived;
//! - **unexpected**: a stream (destination, APPID, svID) nobody configured,
//!   with its sample count;
//! - **mismatch** per field ([`hoptrace_sv::Checked`], compared by
//!   [`StreamSpec::verify`]): the samples that differ, and the first
//!   difference in words (`confRev 7, expected 8`);
//! - **smpSynch changes**: the merging unit's synchronisation state changed
//!   during the run (lost or regained its clock), with the last state;
//! - **wrong sample rate**: smpCnt reached the configured rate (it counts
//!   the samples of one second, so it must stay below it), or it wrapped
//!   at least twice without reaching `rate - 1` (a 4000/s stream configured
//!   as 4800/s).
//!
//! Keys are matched and counted by [`StreamPresence`] (without allocating;
//! only the first sample of an unexpected stream and the first difference
//! of each field allocate).

use hoptrace_sv::{Asdu, Checked, MacAddr, StreamId, StreamPresence, StreamSpec, SvFrame};

/// What is checked on one configured stream's samples.
#[derive(Debug, Clone)]
pub struct ExpectedStream {
    pub spec: StreamSpec,
    pub id: StreamId,
    /// Per [`Checked::ALL`] field: samples that differ, and the first difference.
    mismatched: [u64; Checked::ALL.len()],
    first_difference: [Option<String>; Checked::ALL.len()],
    last_smp_synch: Option<u8>,
    pub smp_synch_changes: u64,
    /// Samples with smpCnt at or above the configured rate.
    pub smp_cnt_beyond_rate: u64,
    pub max_smp_cnt: u16,
    last_smp_cnt: Option<u16>,
    /// smpCnt went down by more than half the rate (a wrap).
    pub wraps: u64,
}

/// One way the received streams differ from the configured ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamProblem {
    Missing {
        stream: StreamId,
    },
    Unexpected {
        stream: StreamId,
        samples: u64,
    },
    /// Unexpected streams beyond those named ([`hoptrace_sv::presence::MAX_UNEXPECTED`]).
    MoreUnexpected {
        samples: u64,
    },
    Mismatch {
        stream: StreamId,
        field: Checked,
        samples: u64,
        first: String,
    },
    SmpSynchChanged {
        stream: StreamId,
        changes: u64,
        last: u8,
    },
    SmpCntBeyondRate {
        stream: StreamId,
        samples: u64,
        max_smp_cnt: u16,
        wrap: u32,
    },
    WrapsEarly {
        stream: StreamId,
        max_smp_cnt: u16,
        wrap: u32,
    },
}

impl StreamProblem {
    /// Short name of the kind of problem (a metrics label, a JSON key).
    pub fn kind(&self) -> &'static str {
        match self {
            StreamProblem::Missing { .. } => "missing",
            StreamProblem::Unexpected { .. } | StreamProblem::MoreUnexpected { .. } => "unexpected",
            StreamProblem::Mismatch { field, .. } => field.name(),
            StreamProblem::SmpSynchChanged { .. } => "smpSynch change",
            StreamProblem::SmpCntBeyondRate { .. } | StreamProblem::WrapsEarly { .. } => {
                "sample rate"
            }
        }
    }
    /// The stream the problem is about (None: several unnamed ones).
    pub fn stream(&self) -> Option<&StreamId> {
        Some(match self {
            StreamProblem::MoreUnexpected { .. } => return None,
            StreamProblem::Missing { stream }
            | StreamProblem::Unexpected { stream, .. }
            | StreamProblem::Mismatch { stream, .. }
            | StreamProblem::SmpSynchChanged { stream, .. }
            | StreamProblem::SmpCntBeyondRate { stream, .. }
            | StreamProblem::WrapsEarly { stream, .. } => stream,
        })
    }
}

impl std::fmt::Display for StreamProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = |s: &StreamId| format!("{} ({} 0x{:04X})", s.sv_id_lossy(), s.dst_mac, s.appid);
        match self {
            StreamProblem::Missing { stream } => {
                write!(f, "{}: missing: no sample received", name(stream))
            }
            StreamProblem::Unexpected { stream, samples } => write!(
                f,
                "{}: unexpected: {samples} samples of a stream that is not configured",
                name(stream)
            ),
            StreamProblem::MoreUnexpected { samples } => write!(
                f,
                "{samples} samples of further unexpected streams (only {} are named)",
                hoptrace_sv::presence::MAX_UNEXPECTED
            ),
            StreamProblem::Mismatch {
                stream,
                field,
                samples,
                first,
            } => write!(
                f,
                "{}: {} differs in {samples} samples (first: {first})",
                name(stream),
                field.name()
            ),
            StreamProblem::SmpSynchChanged {
                stream,
                changes,
                last,
            } => write!(
                f,
                "{}: smpSynch changed {changes} times (last: {last}; 0 none, 1 local, 2 global clock)",
                name(stream)
            ),
            StreamProblem::SmpCntBeyondRate {
                stream,
                samples,
                max_smp_cnt,
                wrap,
            } => write!(
                f,
                "{}: sample rate: {samples} samples with smpCnt at or above {wrap} (up to {max_smp_cnt}): the stream is faster than configured",
                name(stream)
            ),
            StreamProblem::WrapsEarly {
                stream,
                max_smp_cnt,
                wrap,
            } => write!(
                f,
                "{}: sample rate: smpCnt wraps after {}, expected after {}: the stream sends {}/s, configured {wrap}/s",
                name(stream),
                max_smp_cnt,
                wrap - 1,
                *max_smp_cnt as u32 + 1
            ),
        }
    }
}

/// The configured streams of a subscriber and what arrived.
#[derive(Debug, Clone, Default)]
pub struct Expectations {
    /// In configuration order, as [`StreamPresence::expected`].
    pub streams: Vec<ExpectedStream>,
    /// Samples per configured stream, and the unexpected streams.
    pub presence: StreamPresence,
}

impl Expectations {
    pub fn new(specs: &[StreamSpec]) -> Expectations {
        Expectations {
            streams: specs
                .iter()
                .map(|spec| ExpectedStream {
                    id: spec.stream_id(),
                    spec: spec.clone(),
                    mismatched: [0; Checked::ALL.len()],
                    first_difference: Default::default(),
                    last_smp_synch: None,
                    smp_synch_changes: 0,
                    smp_cnt_beyond_rate: 0,
                    max_smp_cnt: 0,
                    last_smp_cnt: None,
                    wraps: 0,
                })
                .collect(),
            presence: StreamPresence::new(specs.iter().map(StreamSpec::stream_id)),
        }
    }

    /// The configured stream with this key.
    pub fn find(&self, dst: MacAddr, appid: u16, sv_id: &[u8]) -> Option<&ExpectedStream> {
        self.streams
            .iter()
            .find(|s| s.id.matches(dst, appid, sv_id))
    }

    /// Check one sample (`asdu`, one ASDU of `frame`); the index of its
    /// configured stream, or None for an unexpected one.
    pub fn observe(&mut self, frame: &SvFrame<'_>, asdu: &Asdu<'_>) -> Option<usize> {
        let i = self.presence.observe(frame.dst, frame.appid, asdu.sv_id)?;
        let s = &mut self.streams[i];
        let differs = s.spec.verify(frame, asdu);
        for (n, field) in Checked::ALL.into_iter().enumerate() {
            if differs.contains(field) {
                s.mismatched[n] += 1;
                if s.first_difference[n].is_none() {
                    s.first_difference[n] = Some(s.spec.explain(field, frame, asdu));
                }
            }
        }
        if s.last_smp_synch.is_some_and(|l| l != asdu.smp_synch) {
            s.smp_synch_changes += 1;
        }
        s.last_smp_synch = Some(asdu.smp_synch);
        if let Some(wrap) = s.spec.smp_cnt_wrap() {
            if asdu.smp_cnt as u32 >= wrap {
                s.smp_cnt_beyond_rate += 1;
            }
            if s.last_smp_cnt
                .is_some_and(|l| l as u32 > asdu.smp_cnt as u32 + wrap / 2)
            {
                s.wraps += 1;
            }
        }
        s.last_smp_cnt = Some(asdu.smp_cnt);
        s.max_smp_cnt = s.max_smp_cnt.max(asdu.smp_cnt);
        Some(i)
    }

    /// Samples received of configured stream `i`.
    pub fn samples(&self, i: usize) -> u64 {
        self.presence.expected[i].1
    }

    /// Every difference between the configured and the received streams,
    /// configured streams first (in configuration order), then unexpected ones.
    pub fn problems(&self) -> Vec<StreamProblem> {
        let mut out = Vec::new();
        for (i, s) in self.streams.iter().enumerate() {
            if self.samples(i) == 0 {
                out.push(StreamProblem::Missing {
                    stream: s.id.clone(),
                });
                continue;
            }
            for (n, field) in Checked::ALL.into_iter().enumerate() {
                if s.mismatched[n] > 0 {
                    out.push(StreamProblem::Mismatch {
                        stream: s.id.clone(),
                        field,
                        samples: s.mismatched[n],
                        first: s.first_difference[n].clone().unwrap_or_default(),
                    });
                }
            }
            if s.smp_synch_changes > 0 {
                out.push(StreamProblem::SmpSynchChanged {
                    stream: s.id.clone(),
                    changes: s.smp_synch_changes,
                    last: s.last_smp_synch.unwrap_or(0),
                });
            }
            if let Some(wrap) = s.spec.smp_cnt_wrap() {
                if s.smp_cnt_beyond_rate > 0 {
                    out.push(StreamProblem::SmpCntBeyondRate {
                        stream: s.id.clone(),
                        samples: s.smp_cnt_beyond_rate,
                        max_smp_cnt: s.max_smp_cnt,
                        wrap,
                    });
                } else if s.wraps >= 2 && (s.max_smp_cnt as u32) + 1 < wrap {
                    out.push(StreamProblem::WrapsEarly {
                        stream: s.id.clone(),
                        max_smp_cnt: s.max_smp_cnt,
                        wrap,
                    });
                }
            }
        }
        for (id, samples) in &self.presence.unexpected {
            out.push(StreamProblem::Unexpected {
                stream: id.clone(),
                samples: *samples,
            });
        }
        if self.presence.unexpected_overflow > 0 {
            out.push(StreamProblem::MoreUnexpected {
                samples: self.presence.unexpected_overflow,
            });
        }
        out
    }

    /// `expected 5: present 4, unexpected 1`: for a status line.
    pub fn status(&self) -> String {
        self.presence.status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoptrace_sv::generate::StreamPlan;

    fn spec(sv_id: &str, appid: u16, index: u16) -> StreamSpec {
        let mut s = StreamSpec::le(sv_id, appid, MacAddr::sv_multicast(index));
        s.smp_mod = hoptrace_sv::SmpMod::SamplesPerSecond;
        s.smp_rate = 4000;
        s
    }

    /// Feed every frame of `plan` to `e`.
    fn feed(e: &mut Expectations, plan: &StreamPlan) {
        for f in plan.frames().unwrap() {
            let frame = hoptrace_sv::decode(&f.bytes).unwrap();
            for a in frame.asdus() {
                e.observe(&frame, &a);
            }
        }
    }

    fn plan(specs: Vec<StreamSpec>, samples: u64) -> StreamPlan {
        let mut plans = StreamPlan::for_specs(
            &specs,
            &StreamPlan {
                samples,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(plans.len(), 1);
        plans.remove(0)
    }

    #[test]
    fn frames_built_from_the_configured_streams_raise_no_problem() {
        let specs = vec![spec("A", 0x4001, 1), spec("B", 0x4002, 2)];
        let mut e = Expectations::new(&specs);
        feed(&mut e, &plan(specs, 9000));
        assert_eq!(e.problems(), vec![]);
        assert_eq!(e.presence.present(), 2);
        assert_eq!(e.samples(0), 9000);
        assert_eq!(e.streams[0].wraps, 2);
    }

    #[test]
    fn a_missing_stream_and_a_changed_conf_rev_are_exactly_the_two_problems() {
        let specs = vec![
            spec("A", 0x4001, 1),
            spec("B", 0x4002, 2),
            spec("C", 0x4003, 3),
        ];
        let mut e = Expectations::new(&specs);
        let mut sent = vec![specs[0].clone(), specs[2].clone()];
        sent[1].conf_rev = 8;
        feed(&mut e, &plan(sent, 100));
        let problems = e.problems();
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert_eq!(
            problems[0],
            StreamProblem::Missing {
                stream: specs[1].stream_id()
            }
        );
        assert_eq!(
            problems[1],
            StreamProblem::Mismatch {
                stream: specs[2].stream_id(),
                field: Checked::ConfRev,
                samples: 100,
                first: "confRev 8, expected 1".into()
            }
        );
        assert_eq!(
            problems[1].to_string(),
            "C (01:0c:cd:04:00:03 0x4003): confRev differs in 100 samples (first: confRev 8, expected 1)"
        );
    }

    #[test]
    fn an_unconfigured_stream_is_unexpected_and_a_simulated_one_is_flagged() {
        let specs = vec![spec("A", 0x4001, 1)];
        let mut e = Expectations::new(&specs);
        let mut sim = specs[0].clone();
        sim.simulation = true;
        feed(&mut e, &plan(vec![sim, spec("X", 0x4009, 9)], 10));
        let kinds: Vec<&str> = e.problems().iter().map(|p| p.kind()).collect();
        assert_eq!(kinds, ["simulation", "unexpected"]);
        assert_eq!(e.presence.unexpected[0].1, 10);
        assert_eq!(e.status(), "expected 1: present 1, unexpected 1");
    }

    #[test]
    fn a_4000_per_second_stream_configured_at_4800_is_a_wrong_rate_and_4800_at_4000_too() {
        let mut at_4800 = spec("A", 0x4001, 1);
        at_4800.smp_rate = 4800;
        let mut e = Expectations::new(std::slice::from_ref(&at_4800));
        feed(&mut e, &plan(vec![spec("A", 0x4001, 1)], 12_000));
        assert!(
            matches!(
                e.problems()[..],
                [StreamProblem::WrapsEarly {
                    max_smp_cnt: 3999,
                    wrap: 4800,
                    ..
                }]
            ),
            "{:?}",
            e.problems()
        );
        let mut e = Expectations::new(&[spec("A", 0x4001, 1)]);
        feed(&mut e, &plan(vec![at_4800], 4800));
        assert!(
            matches!(
                e.problems()[..],
                [StreamProblem::SmpCntBeyondRate {
                    samples: 800,
                    max_smp_cnt: 4799,
                    wrap: 4000,
                    ..
                }]
            ),
            "{:?}",
            e.problems()
        );
    }

    #[test]
    fn a_change_of_smp_synch_is_counted_with_the_last_state() {
        let specs = vec![spec("A", 0x4001, 1)];
        let mut e = Expectations::new(&specs);
        let mut lost = specs[0].clone();
        lost.smp_synch = Some(0);
        feed(&mut e, &plan(specs.clone(), 5));
        feed(&mut e, &plan(vec![lost], 5));
        let p = e.problems();
        assert_eq!(
            p,
            vec![StreamProblem::SmpSynchChanged {
                stream: specs[0].stream_id(),
                changes: 1,
                last: 0
            }]
        );
    }
}
