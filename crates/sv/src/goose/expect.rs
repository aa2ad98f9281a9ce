//! Expected GOOSE control blocks: what a subscriber configured with them
//! (from SCL) checks on every message, as a relay does.
//!
//! A relay subscribes to the control blocks of its configuration and
//! follows each by its gocbRef. It drops a message whose configuration
//! differs from what it was configured with: confRev (the data set's
//! revision), datSet, goID (the gocbRef when the message has none), APPID
//! or destination. A subscriber given the same configuration counts:
//!
//! - per expected block, the messages received and the **configuration
//!   mismatches**: messages with at least one such field different, with
//!   a count per field and the first difference in words (`confRev 4,
//!   expected 3`);
//! - **missing**: an expected block of which no message arrived;
//! - **unexpected**: a gocbRef heard that nobody expected, with its
//!   message count.
//!
//! Pure: the caller hands every decoded message to [`GooseExpectations::observe`].

use std::collections::{BTreeMap, HashMap};

use super::GooseFrame;
use crate::MacAddr;

/// One control block as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedBlock {
    /// How the configuration names it (`REL01/PROT/GoTrip`).
    pub label: String,
    pub gocb_ref: String,
    pub go_id: String,
    pub dat_set: String,
    pub conf_rev: u32,
    pub appid: u16,
    pub dst: MacAddr,
}

/// A field of the configuration a message is checked on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigField {
    ConfRev,
    DatSet,
    GoId,
    Appid,
    Destination,
}

impl ConfigField {
    pub const ALL: [ConfigField; 5] = [
        ConfigField::ConfRev,
        ConfigField::DatSet,
        ConfigField::GoId,
        ConfigField::Appid,
        ConfigField::Destination,
    ];

    /// Its name in 8-1 (`confRev`, `datSet`, `goID`, `APPID`, `destination`).
    pub fn name(self) -> &'static str {
        match self {
            ConfigField::ConfRev => "confRev",
            ConfigField::DatSet => "datSet",
            ConfigField::GoId => "goID",
            ConfigField::Appid => "APPID",
            ConfigField::Destination => "destination",
        }
    }
}

/// What was heard of one expected block.
#[derive(Debug, Clone)]
pub struct BlockCheck {
    pub expected: ExpectedBlock,
    pub received: u64,
    /// Messages with at least one field that differs from the configuration.
    pub config_mismatches: u64,
    /// Per [`ConfigField::ALL`]: messages whose field differs.
    pub mismatched: [u64; ConfigField::ALL.len()],
    /// Per [`ConfigField::ALL`]: the first difference, in words.
    pub first_difference: [Option<String>; ConfigField::ALL.len()],
}

impl BlockCheck {
    /// No message of it arrived.
    pub fn missing(&self) -> bool {
        self.received == 0
    }
}

/// How one message compares with the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Its gocbRef names no expected block.
    Unexpected,
    /// An expected block, as configured.
    AsConfigured,
    /// An expected block, with these differences in words.
    Differs(Vec<String>),
}

/// The expected blocks, and what was heard.
#[derive(Debug, Clone, Default)]
pub struct GooseExpectations {
    /// In the configuration's order.
    pub blocks: Vec<BlockCheck>,
    by_ref: HashMap<String, usize>,
    /// gocbRef heard and not expected -> its messages.
    pub unexpected: BTreeMap<String, u64>,
}

impl GooseExpectations {
    /// Expect `blocks` (a gocbRef given twice is expected once, as its first).
    pub fn new(blocks: Vec<ExpectedBlock>) -> Self {
        let mut e = GooseExpectations::default();
        for b in blocks {
            if e.by_ref.contains_key(&b.gocb_ref) {
                continue;
            }
            e.by_ref.insert(b.gocb_ref.clone(), e.blocks.len());
            e.blocks.push(BlockCheck {
                expected: b,
                received: 0,
                config_mismatches: 0,
                mismatched: [0; ConfigField::ALL.len()],
                first_difference: Default::default(),
            });
        }
        e
    }

    /// One message heard.
    pub fn observe(&mut self, frame: &GooseFrame) -> Verdict {
        let p = &frame.pdu;
        let Some(&i) = self.by_ref.get(&p.gocb_ref) else {
            *self.unexpected.entry(p.gocb_ref.clone()).or_default() += 1;
            return Verdict::Unexpected;
        };
        let b = &mut self.blocks[i];
        b.received += 1;
        let x = &b.expected;
        let go_id = p.go_id.as_deref().unwrap_or(&p.gocb_ref);
        let mut differences = Vec::new();
        for (k, field) in ConfigField::ALL.into_iter().enumerate() {
            let words = match field {
                ConfigField::ConfRev => (p.conf_rev != x.conf_rev)
                    .then(|| format!("confRev {}, expected {}", p.conf_rev, x.conf_rev)),
                ConfigField::DatSet => (p.dat_set != x.dat_set)
                    .then(|| format!("datSet `{}`, expected `{}`", p.dat_set, x.dat_set)),
                ConfigField::GoId => {
                    (go_id != x.go_id).then(|| format!("goID `{go_id}`, expected `{}`", x.go_id))
                }
                ConfigField::Appid => (frame.appid != x.appid)
                    .then(|| format!("APPID 0x{:04X}, expected 0x{:04X}", frame.appid, x.appid)),
                ConfigField::Destination => (frame.dst != x.dst)
                    .then(|| format!("destination {}, expected {}", frame.dst, x.dst)),
            };
            if let Some(w) = words {
                b.mismatched[k] += 1;
                b.first_difference[k].get_or_insert_with(|| w.clone());
                differences.push(w);
            }
        }
        if differences.is_empty() {
            return Verdict::AsConfigured;
        }
        b.config_mismatches += 1;
        Verdict::Differs(differences)
    }

    /// Expected blocks of which no message arrived.
    pub fn missing(&self) -> impl Iterator<Item = &BlockCheck> {
        self.blocks.iter().filter(|b| b.missing())
    }

    /// Messages of expected blocks with a field that differs, over all blocks.
    pub fn config_mismatches(&self) -> u64 {
        self.blocks.iter().map(|b| b.config_mismatches).sum()
    }

    /// True when what was heard is not exactly the configuration: a block
    /// missing, one unexpected, or a message that differs.
    pub fn differ(&self) -> bool {
        self.missing().next().is_some()
            || !self.unexpected.is_empty()
            || self.config_mismatches() > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::goose::{Data, GoosePdu, UtcTime};

    fn expected(name: &str, conf_rev: u32) -> ExpectedBlock {
        ExpectedBlock {
            label: format!("REL01/PROT/{name}"),
            gocb_ref: format!("REL01PROT/LLN0$GO${name}"),
            go_id: format!("REL01{name}"),
            dat_set: "REL01PROT/LLN0$Trip".into(),
            conf_rev,
            appid: 0x1021,
            dst: MacAddr([0x01, 0x0C, 0xCD, 0x01, 0x00, 0x21]),
        }
    }

    fn message(of: &ExpectedBlock) -> GooseFrame {
        GooseFrame {
            dst: of.dst,
            src: MacAddr([2, 0, 0, 0, 0, 1]),
            vlans: vec![],
            appid: of.appid,
            reserved1: 0,
            reserved2: 0,
            pdu: GoosePdu {
                gocb_ref: of.gocb_ref.clone(),
                time_allowed_to_live_ms: 8,
                dat_set: of.dat_set.clone(),
                go_id: Some(of.go_id.clone()),
                t: UtcTime::default(),
                st_num: 1,
                sq_num: 0,
                simulation: false,
                conf_rev: of.conf_rev,
                nds_com: false,
                num_dat_set_entries: 1,
                all_data: vec![Data::Boolean(false)],
            },
        }
    }

    #[test]
    fn blocks_heard_as_configured_missing_unexpected_and_differing_are_told_apart() {
        let trip = expected("GoTrip", 3);
        let status = expected("GoStatus", 1);
        let mut e = GooseExpectations::new(vec![trip.clone(), status.clone()]);
        assert_eq!(e.observe(&message(&trip)), Verdict::AsConfigured);
        let mut other = message(&trip);
        other.pdu.conf_rev = 4;
        other.appid = 0x1022;
        assert_eq!(
            e.observe(&other),
            Verdict::Differs(vec![
                "confRev 4, expected 3".into(),
                "APPID 0x1022, expected 0x1021".into()
            ])
        );
        other.pdu.conf_rev = 5;
        other.pdu.go_id = None;
        other.dst = MacAddr([0x01, 0x0C, 0xCD, 0x01, 0x00, 0x01]);
        other.pdu.dat_set = "X/LLN0$Y".into();
        assert_eq!(
            e.observe(&other),
            Verdict::Differs(vec![
                "confRev 5, expected 3".into(),
                "datSet `X/LLN0$Y`, expected `REL01PROT/LLN0$Trip`".into(),
                "goID `REL01PROT/LLN0$GO$GoTrip`, expected `REL01GoTrip`".into(),
                "APPID 0x1022, expected 0x1021".into(),
                "destination 01:0c:cd:01:00:01, expected 01:0c:cd:01:00:21".into(),
            ]),
            "an absent goID is the gocbRef"
        );
        let stranger = message(&expected("GoElse", 1));
        assert_eq!(e.observe(&stranger), Verdict::Unexpected);
        assert_eq!(e.observe(&stranger), Verdict::Unexpected);
        let t = &e.blocks[0];
        assert_eq!((t.received, t.config_mismatches), (3, 2));
        assert_eq!(t.mismatched, [2, 1, 1, 2, 1]);
        assert_eq!(
            t.first_difference[0].as_deref(),
            Some("confRev 4, expected 3"),
            "the first difference is kept"
        );
        let missing: Vec<&str> = e.missing().map(|b| b.expected.label.as_str()).collect();
        assert_eq!(missing, ["REL01/PROT/GoStatus"]);
        assert_eq!(
            e.unexpected.get("REL01PROT/LLN0$GO$GoElse").copied(),
            Some(2)
        );
        assert_eq!(e.config_mismatches(), 2);
        assert!(e.differ());
    }

    #[test]
    fn every_expected_block_heard_as_configured_does_not_differ() {
        let trip = expected("GoTrip", 3);
        let mut e = GooseExpectations::new(vec![trip.clone(), trip.clone()]);
        assert_eq!(e.blocks.len(), 1, "one gocbRef, one block");
        assert!(e.differ(), "nothing heard yet: missing");
        e.observe(&message(&trip));
        assert!(!e.differ());
    }
}
