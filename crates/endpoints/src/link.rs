//! A receiving interface that goes down and comes back, as every receive
//! loop of the endpoints sees it (the SV subscriber, the reflector, the
//! pinger, the GOOSE subscriber, the relay).
//!
//! When an interface goes down, the kernel detaches the AF_PACKET sockets
//! bound to it and leaves `ENETDOWN` pending on each (`sk_err`): the next
//! `recvmsg`/`recvmmsg` fails with it once, `poll` reports `POLLERR` until
//! it is read (`SO_ERROR` reads and clears it: [`crate::ring::take_socket_error`]),
//! and when the interface comes up again the kernel attaches the socket
//! again, so the same socket receives again. A receive loop that took
//! `ENETDOWN` for a fatal error would end the run at the first link flap;
//! these loops note a time down ([`LinkDowns::went_down`]) and go on, and
//! the time down ends at the first frame received after it
//! ([`LinkDowns::frames_arrived`]). Every report says how many times and
//! for how long its link was down, so the samples lost in between are
//! accounted for, not a mystery.

use std::io;

/// Whether a receive call's error is the interface going down (`ENETDOWN`):
/// a time down to note, not the end of the run.
pub fn is_link_down(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NetworkDown
}

/// A time the receiving interface was down, as the receive path saw it:
/// from the receive call that failed with ENETDOWN to the next frame
/// received after it (by its software RX stamp where the path has one,
/// CLOCK_REALTIME: a ring block handed over after the error may hold
/// frames from before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkDown {
    /// When the receive path saw it (ns, CLOCK_REALTIME).
    pub at_ns: i64,
    /// When the next frame arrived; None: none before the end.
    pub back_ns: Option<i64>,
}

impl LinkDown {
    /// `at 2026-... UTC, frames again after 1.502 s` (or `no frame since`).
    pub fn text(&self) -> String {
        let at = hoptrace_units::format_instant(self.at_ns, "REALTIME", None);
        match self.back_ns {
            Some(b) => format!(
                "at {at}, frames again after {}",
                hoptrace_units::format_duration_ns(b - self.at_ns)
            ),
            None => format!("at {at}, no frame since"),
        }
    }
}

/// The times a receiving interface was down during a run, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkDowns(Vec<LinkDown>);

impl LinkDowns {
    /// A receive call failed with ENETDOWN at `now_ns`: a new time down,
    /// unless one is open.
    pub fn went_down(&mut self, now_ns: i64) {
        if self.0.last().is_none_or(|d| d.back_ns.is_some()) {
            self.0.push(LinkDown {
                at_ns: now_ns,
                back_ns: None,
            });
        }
    }

    /// Frames arrived, the newest received at `newest_ns`: the open time
    /// down, if any, ends when that is after it began.
    pub fn frames_arrived(&mut self, newest_ns: i64) {
        if let Some(d) = self
            .0
            .last_mut()
            .filter(|d| d.back_ns.is_none() && newest_ns > d.at_ns)
        {
            d.back_ns = Some(newest_ns);
        }
    }

    /// The outcome of a receive call that handed out `received` frames
    /// (the newest at `newest_ns`), or failed: a time down begins on
    /// ENETDOWN (0 frames, the loop goes on), ends at the frames after it;
    /// any other error is handed back.
    pub fn account(
        &mut self,
        received: io::Result<usize>,
        newest_ns: impl FnOnce() -> i64,
    ) -> io::Result<usize> {
        match received {
            Ok(0) => Ok(0),
            Ok(n) => {
                self.frames_arrived(newest_ns());
                Ok(n)
            }
            Err(e) if is_link_down(&e) => {
                self.went_down(crate::timestamping::realtime_ns());
                Ok(0)
            }
            Err(e) => Err(e),
        }
    }

    /// The outcome of a one-frame receive (`PacketSocket::recv`): ENETDOWN
    /// begins a time down and is no frame (`None`); any other error is
    /// handed back. The caller ends the time down with the frame's stamp
    /// ([`Self::frames_arrived`]).
    pub fn one<T>(&mut self, received: io::Result<Option<T>>) -> io::Result<Option<T>> {
        match received {
            Err(e) if is_link_down(&e) => {
                self.went_down(crate::timestamping::realtime_ns());
                Ok(None)
            }
            r => r,
        }
    }

    /// The times down, in order.
    pub fn list(&self) -> &[LinkDown] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// ` link down N` for a status line (empty when never down).
    pub fn status(&self) -> String {
        match self.0.len() {
            0 => String::new(),
            n => format!(" link down {n}"),
        }
    }

    /// One `link down at ..., frames again after ...` line per time down.
    pub fn lines(&self) -> String {
        self.0
            .iter()
            .map(|d| format!("link down {}\n", d.text()))
            .collect()
    }

    /// The times down as JSON: `[{"at_ns": .., "back_ns": ..|null}]`.
    pub fn json(&self) -> serde_json::Value {
        self.0
            .iter()
            .map(|d| serde_json::json!({"at_ns": d.at_ns, "back_ns": d.back_ns}))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_down_lasts_from_the_first_enetdown_to_the_next_frame_and_a_second_one_is_a_new_entry()
    {
        let mut l = LinkDowns::default();
        l.frames_arrived(5);
        assert!(l.is_empty(), "frames alone are no time down");
        l.went_down(100);
        l.went_down(150);
        assert_eq!(
            l.list(),
            [LinkDown {
                at_ns: 100,
                back_ns: None
            }]
        );
        l.frames_arrived(90);
        assert_eq!(
            l.list()[0].back_ns,
            None,
            "a frame from before the error does not end it"
        );
        l.frames_arrived(1_500_000_100);
        l.went_down(2_000_000_000);
        assert_eq!(
            l.list(),
            [
                LinkDown {
                    at_ns: 100,
                    back_ns: Some(1_500_000_100)
                },
                LinkDown {
                    at_ns: 2_000_000_000,
                    back_ns: None
                },
            ]
        );
        assert!(
            l.list()[0].text().ends_with("frames again after 1.500 s"),
            "{}",
            l.list()[0].text()
        );
        assert!(l.list()[1].text().ends_with("no frame since"));
        assert_eq!(l.status(), " link down 2");
        assert_eq!(l.lines().lines().count(), 2);
    }

    #[test]
    fn enetdown_is_a_time_down_and_any_other_receive_error_is_handed_back() {
        let mut l = LinkDowns::default();
        let down = io::Error::from_raw_os_error(libc::ENETDOWN);
        assert_eq!(l.account(Err(down), || 0).unwrap(), 0);
        assert_eq!(l.len(), 1);
        let other = io::Error::from_raw_os_error(libc::EBADF);
        assert_eq!(
            l.account(Err(other), || 0).unwrap_err().raw_os_error(),
            Some(libc::EBADF)
        );
        assert_eq!(l.len(), 1);
        assert_eq!(l.account(Ok(3), || i64::MAX).unwrap(), 3);
        assert!(l.list()[0].back_ns.is_some());
    }
}
