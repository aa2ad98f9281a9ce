//! The retransmission times of a `GSE` address: `MinTime` (the interval
//! of the first retransmissions after a change) and `MaxTime` (the
//! heartbeat), in whole milliseconds.
//!
//! ```xml
//! <MinTime unit="s" multiplier="m">4</MinTime>      <!-- 4 ms -->
//! <MaxTime unit="s" multiplier="">2</MaxTime>       <!-- 2 s -->
//! ```
//!
//! The schema fixes the unit to seconds and lets the multiplier default
//! to `m`; the value is an `xs:decimal`, read exactly (no floating point):
//! `0.004` s is 4 ms. The retransmission scheme and timeAllowedtoLive count
//! whole milliseconds, so a time must be a positive whole number of ms. An
//! absent element gets hoptrace's default (the defaults of `goose pcap`),
//! with a warning saying which; a `MinTime` above the `MaxTime` is refused
//! (the interval doubles from one up to the other).

use roxmltree::Node;

use crate::error::Problem;
use crate::select::CbRef;
use crate::xml::{attr, SclDoc};

/// The minimum time (first retransmissions after a change) when `GSE` has
/// no `MinTime`: hoptrace's default, as `goose pcap --min-time`.
pub const DEFAULT_MIN_TIME_MS: u32 = 2;
/// The maximum time (the heartbeat) when `GSE` has no `MaxTime`.
pub const DEFAULT_MAX_TIME_MS: u32 = 1000;

/// A retransmission time in ms, and whether the file gave it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetransmissionTime {
    pub ms: u32,
    /// False: absent from the file, hoptrace's default.
    pub from_file: bool,
}

/// `MinTime` and `MaxTime` of one `GSE` element.
pub struct TimeReader<'s, 'a, 'input> {
    pub scl: &'s SclDoc<'input>,
    pub gse: Node<'a, 'input>,
    pub cb: &'s CbRef,
    pub problems: &'s mut Vec<Problem>,
    pub warnings: &'s mut Vec<Problem>,
}

impl<'a, 'input> TimeReader<'_, 'a, 'input> {
    /// Both times, checked together; None when a problem was added.
    pub fn read(&mut self) -> Option<(RetransmissionTime, RetransmissionTime)> {
        let min = self.one(
            "MinTime",
            DEFAULT_MIN_TIME_MS,
            "the interval of the first retransmissions after a change",
        );
        let max = self.one(
            "MaxTime",
            DEFAULT_MAX_TIME_MS,
            "the heartbeat while nothing changes",
        );
        let ((min, min_node), (max, max_node)) = (min?, max?);
        if min.ms <= max.ms {
            return Some((min, max));
        }
        let describe = |t: RetransmissionTime, node: Option<Node<'_, '_>>, name: &str| match node {
            Some(n) => format!(
                "{name} {} ms (line {})",
                t.ms,
                self.scl.location(n.range().start).line
            ),
            None => format!("the default {name} {} ms (no <{name}>)", t.ms),
        };
        let message = format!(
            "{} is above {}: the interval doubles from MinTime up to MaxTime",
            describe(min, min_node, "MinTime"),
            describe(max, max_node, "MaxTime"),
        );
        let at = min_node.or(max_node).unwrap_or(self.gse);
        self.problems
            .push(self.scl.problem(at, None, Some(self.cb), message));
        None
    }

    /// One time: the element's value in ms, or the default (a warning).
    fn one(
        &mut self,
        name: &str,
        default_ms: u32,
        what: &str,
    ) -> Option<(RetransmissionTime, Option<Node<'a, 'input>>)> {
        let scl = self.scl;
        let Some(node) = self.gse.children().find(|c| scl.is(*c, name)) else {
            self.warnings.push(scl.problem(
                self.gse,
                None,
                Some(self.cb),
                format!("no <{name}>: {default_ms} ms assumed ({what}; hoptrace's default)"),
            ));
            let time = RetransmissionTime {
                ms: default_ms,
                from_file: false,
            };
            return Some((time, None));
        };
        match parse_time(node, name) {
            Ok(ms) => Some((
                RetransmissionTime {
                    ms,
                    from_file: true,
                },
                Some(node),
            )),
            Err(m) => {
                self.problems
                    .push(scl.problem(node, None, Some(self.cb), m));
                None
            }
        }
    }
}

/// `<MinTime unit="s" multiplier="m">4</MinTime>` in whole ms (> 0).
/// The unit is seconds; the multiplier `m` (the default), none, `u` or `n`.
fn parse_time(node: Node<'_, '_>, name: &str) -> Result<u32, String> {
    let unit = attr(node, "unit").unwrap_or("s");
    if unit != "s" {
        return Err(format!(
            "{name} has unit=\"{unit}\": SCL gives it in seconds (unit=\"s\", multiplier=\"m\" for ms)"
        ));
    }
    let multiplier = attr(node, "multiplier").unwrap_or("m");
    let ns_per_unit: u64 = match multiplier {
        "" => 1_000_000_000,
        "m" => 1_000_000,
        "u" | "\u{b5}" | "mu" => 1_000,
        "n" => 1,
        other => {
            return Err(format!(
                "{name} has multiplier=\"{other}\": use m (ms, the default), none (s), u (us) or n (ns)"
            ))
        }
    };
    let text = crate::xml::text(node);
    let unit_name = match multiplier {
        "" => "s",
        "m" => "ms",
        "n" => "ns",
        _ => "us",
    };
    let ns = parse_decimal(text, ns_per_unit)
        .ok_or_else(|| format!("{name} `{text}` is not a number of {unit_name} (e.g. 4)"))?;
    if ns == 0 {
        return Err(format!(
            "{name} 0: the retransmission scheme needs a positive interval (e.g. 4 ms)"
        ));
    }
    if !ns.is_multiple_of(1_000_000) {
        return Err(format!(
            "{name} `{text}` {unit_name} is not a whole number of milliseconds: the retransmission scheme and timeAllowedtoLive count ms"
        ));
    }
    u32::try_from(ns / 1_000_000).map_err(|_| format!("{name} `{text}` {unit_name} is too long"))
}

/// A non-negative decimal (`4`, `0.004`) times `scale`, exactly; None when
/// it is not one, has a fraction finer than 1/`scale`, or overflows.
fn parse_decimal(text: &str, scale: u64) -> Option<u64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut value = whole.checked_mul(scale)?;
    let mut place = scale;
    for d in fraction.bytes() {
        let digit = u64::from(d - b'0');
        if !place.is_multiple_of(10) {
            // A digit finer than one ns: only zeros are exact.
            if digit != 0 {
                return None;
            }
            continue;
        }
        place /= 10;
        value = value.checked_add(digit * place)?;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::parse_decimal;

    #[test]
    fn times_are_read_exactly_in_their_unit() {
        assert_eq!(parse_decimal("4", 1_000_000), Some(4_000_000));
        assert_eq!(parse_decimal("0.004", 1_000_000_000), Some(4_000_000));
        assert_eq!(parse_decimal("4.", 1_000_000), Some(4_000_000));
        assert_eq!(parse_decimal(".5", 1_000_000), Some(500_000));
        assert_eq!(parse_decimal("1.0000000", 1_000_000), Some(1_000_000));
        assert_eq!(
            parse_decimal("1.0000001", 1_000_000),
            None,
            "finer than 1 ns"
        );
        assert_eq!(parse_decimal("", 1), None);
        assert_eq!(parse_decimal(".", 1), None);
        assert_eq!(parse_decimal("-4", 1), None);
        assert_eq!(parse_decimal("4e3", 1), None);
        assert_eq!(parse_decimal("99999999999999999999", 1), None);
    }
}
