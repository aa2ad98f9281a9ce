//! Which configured streams were seen, and which streams nobody configured.
//!
//! A tool that sees only a frame's key (destination MAC, APPID, svID), such
//! as the kernel tracer, can still tell a user that a configured stream is
//! missing or that an unknown one is on the wire. [`StreamPresence`] counts
//! frames (or samples) per configured key and per unexpected key, matching
//! without allocating; an unexpected key is stored once, and at most
//! [`MAX_UNEXPECTED`] of them (the rest are counted together), so a flood
//! of random svIDs cannot grow it without bound.

use crate::frame::MacAddr;
use crate::identity::StreamId;

/// Most distinct unexpected streams kept by name.
pub const MAX_UNEXPECTED: usize = 64;

/// Counts per configured and per unexpected stream key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamPresence {
    /// Configured streams, in configuration order, with what was seen of each.
    pub expected: Vec<(StreamId, u64)>,
    /// Streams seen that are not configured, in order of appearance.
    pub unexpected: Vec<(StreamId, u64)>,
    /// Seen after [`MAX_UNEXPECTED`] unexpected streams were already kept.
    pub unexpected_overflow: u64,
}

impl StreamPresence {
    pub fn new(ids: impl IntoIterator<Item = StreamId>) -> StreamPresence {
        StreamPresence {
            expected: ids.into_iter().map(|id| (id, 0)).collect(),
            ..Default::default()
        }
    }

    /// Count one frame (or sample) of key (`dst`, `appid`, `sv_id`); the
    /// index of the configured stream it belongs to, if any.
    pub fn observe(&mut self, dst: MacAddr, appid: u16, sv_id: &[u8]) -> Option<usize> {
        if let Some(i) = self
            .expected
            .iter()
            .position(|(id, _)| id.matches(dst, appid, sv_id))
        {
            self.expected[i].1 += 1;
            return Some(i);
        }
        let kept = self.unexpected.len();
        match self
            .unexpected
            .iter_mut()
            .find(|(id, _)| id.matches(dst, appid, sv_id))
        {
            Some(u) => u.1 += 1,
            None if kept < MAX_UNEXPECTED => {
                self.unexpected.push((StreamId::new(dst, appid, sv_id), 1))
            }
            None => self.unexpected_overflow += 1,
        }
        None
    }

    /// Configured streams never seen.
    pub fn missing(&self) -> impl Iterator<Item = &StreamId> {
        self.expected
            .iter()
            .filter(|(_, n)| *n == 0)
            .map(|(id, _)| id)
    }

    /// Configured streams seen at least once.
    pub fn present(&self) -> usize {
        self.expected.iter().filter(|(_, n)| *n > 0).count()
    }

    /// Nothing missing, nothing unexpected.
    pub fn as_configured(&self) -> bool {
        self.missing().next().is_none()
            && self.unexpected.is_empty()
            && self.unexpected_overflow == 0
    }

    /// One line per difference: `MU02MUB01 (01:0c:cd:04:00:20 0x4020):
    /// missing` and `X (...): unexpected: 10 frames` (`unit` names what
    /// was counted).
    pub fn problems(&self, unit: &str) -> Vec<String> {
        let name = |s: &StreamId| format!("{} ({} 0x{:04X})", s.sv_id_lossy(), s.dst_mac, s.appid);
        let mut out: Vec<String> = self
            .missing()
            .map(|id| format!("{}: missing: none seen", name(id)))
            .collect();
        for (id, n) in &self.unexpected {
            out.push(format!(
                "{}: unexpected: {n} {unit} of a stream that is not configured",
                name(id)
            ));
        }
        if self.unexpected_overflow > 0 {
            out.push(format!(
                "{} more {unit} of further unexpected streams (only {MAX_UNEXPECTED} are named)",
                self.unexpected_overflow
            ));
        }
        out
    }

    /// `expected 5: present 4, unexpected 1`.
    pub fn status(&self) -> String {
        format!(
            "expected {}: present {}, unexpected {}",
            self.expected.len(),
            self.present(),
            self.unexpected.len() + usize::from(self.unexpected_overflow > 0)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_keys_are_counted_and_the_others_named_as_unexpected_up_to_a_bound() {
        let a = StreamId::new(MacAddr::sv_multicast(1), 0x4001, b"A");
        let b = StreamId::new(MacAddr::sv_multicast(2), 0x4002, b"B");
        let mut p = StreamPresence::new([a.clone(), b.clone()]);
        assert_eq!(p.observe(a.dst_mac, a.appid, b"A"), Some(0));
        // Same svID, other APPID: another stream.
        assert_eq!(p.observe(a.dst_mac, 0x4009, b"A"), None);
        assert_eq!(p.observe(a.dst_mac, 0x4009, b"A"), None);
        assert_eq!(p.present(), 1);
        assert_eq!(p.missing().collect::<Vec<_>>(), [&b]);
        assert_eq!(p.unexpected[0].1, 2);
        assert_eq!(
            p.problems("frames"),
            [
                "B (01:0c:cd:04:00:02 0x4002): missing: none seen",
                "A (01:0c:cd:04:00:01 0x4009): unexpected: 2 frames of a stream that is not configured"
            ]
        );
        for i in 0..100u16 {
            p.observe(MacAddr::sv_multicast(i), 0x5000 + i, b"X");
        }
        assert_eq!(p.unexpected.len(), MAX_UNEXPECTED);
        assert_eq!(p.unexpected_overflow, 100 - (MAX_UNEXPECTED as u64 - 1));
        assert!(!p.as_configured());
        assert_eq!(p.status(), "expected 2: present 1, unexpected 65");
    }
}
