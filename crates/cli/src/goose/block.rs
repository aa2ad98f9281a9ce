//! The one GOOSE control block `goose pcap` and `goose publish` send:
//! what it publishes, on which retransmission scheme, and when its state
//! changes.
//!
//! Its identity (gocbRef, goID, datSet, APPID, destination, VLAN, confRev)
//! and its minimum and maximum times come from the flags, or from one
//! `GSEControl` of an SCL file (`--scl`, [`super::scl`]); a flag that the
//! file would override is refused next to `--scl` (clap's conflicts), so
//! what is sent is never half the file and half the command line. The
//! burst, the TAL factor, the simulation flag and the state changes are
//! not configuration of the file and come from the flags in both cases.

use anyhow::{bail, Context};
use hoptrace_scl::SclGooseBlock;
use hoptrace_sv::goose::schedule::Scheme;
use hoptrace_sv::goose::{Data, GooseFrame, GoosePdu, UtcTime};
use hoptrace_sv::{MacAddr, VlanTag};
use hoptrace_units::arg;

use super::scl::{self, GooseSclArgs};

/// One control block: what it publishes, on which scheme, and when its
/// state changes (shared by `goose pcap` and `goose publish`).
#[derive(clap::Args, Debug, Clone)]
pub struct BlockArgs {
    #[command(flatten)]
    pub scl: GooseSclArgs,
    /// The control block's reference (not with --scl, which gives it).
    #[arg(long, default_value = "HOPTRACE/LLN0$GO$gcb1", conflicts_with = "scl")]
    pub gocb_ref: String,
    /// The GOOSE identifier (not with --scl).
    #[arg(long, default_value = "HOPTRACE_GOOSE", conflicts_with = "scl")]
    pub go_id: String,
    /// The data set's reference (not with --scl).
    #[arg(long, default_value = "HOPTRACE/LLN0$trips", conflicts_with = "scl")]
    pub dat_set: String,
    /// APPID (hex with 0x, or decimal; not with --scl).
    #[arg(long, default_value = "0x0001", conflicts_with = "scl")]
    pub appid: String,
    /// Destination MAC (not with --scl).
    #[arg(long, default_value = "01:0c:cd:01:00:01", conflicts_with = "scl")]
    pub dst_mac: MacAddr,
    /// 802.1Q tag `ID[:PRIO]` (priority 4 when omitted; not with --scl).
    #[arg(long, conflicts_with = "scl")]
    pub vlan: Option<VlanTag>,
    /// confRev: the revision of the data set's configuration (not with --scl).
    #[arg(long = "conf-rev", default_value_t = 1, conflicts_with = "scl")]
    pub conf_rev: u32,
    /// Set the Simulation bit (Reserved1) and the PDU's simulation flag.
    #[arg(long)]
    pub simulation: bool,
    /// Retransmission interval right after a change (SCL MinTime; not with --scl).
    #[arg(long, default_value = "2ms", value_parser = arg::duration_ns, conflicts_with = "scl")]
    pub min_time: u64,
    /// Heartbeat interval (SCL MaxTime; not with --scl).
    #[arg(long, default_value = "1s", value_parser = arg::duration_ns, conflicts_with = "scl")]
    pub max_time: u64,
    /// Retransmissions at the minimum time before the interval doubles.
    #[arg(long, default_value_t = 2)]
    pub burst: u32,
    /// timeAllowedtoLive as a multiple of the interval to the next message.
    #[arg(long, default_value_t = 2)]
    pub tal_factor: u32,
    /// A state change (the trip flips) this often, from the start.
    #[arg(long, value_parser = arg::duration_ns, conflicts_with = "change_at")]
    pub change_every: Option<u64>,
    /// State changes at these times after the start (e.g. 1s 1.5s).
    #[arg(long, value_parser = arg::duration_ns, num_args = 1..)]
    pub change_at: Vec<u64>,
}

/// What is sent: the frame (counters, TAL, `t` and the trip set per
/// message) and the retransmission scheme.
pub struct Block {
    pub frame: GooseFrame,
    pub scheme: Scheme,
}

/// The fields that name the control block and where its frames go.
struct Identity {
    gocb_ref: String,
    go_id: String,
    dat_set: String,
    appid: u16,
    dst: MacAddr,
    vlan: Option<VlanTag>,
    conf_rev: u32,
}

impl BlockArgs {
    /// The block from the flags, or from the one block `--scl` selects
    /// (said on stderr, with the file's warnings).
    pub fn resolve(&self) -> anyhow::Result<Block> {
        let Some(path) = &self.scl.scl else {
            let appid = crate::sv::streams::parse_appid(&self.appid)
                .map_err(anyhow::Error::msg)
                .context("--appid")?;
            let id = Identity {
                gocb_ref: self.gocb_ref.clone(),
                go_id: self.go_id.clone(),
                dat_set: self.dat_set.clone(),
                appid,
                dst: self.dst_mac,
                vlan: self.vlan,
                conf_rev: self.conf_rev,
            };
            let min = ms(self.min_time, "--min-time")?;
            let max = ms(self.max_time, "--max-time")?;
            return Ok(Block {
                scheme: self.scheme(min, max)?,
                frame: self.frame(id),
            });
        };
        let b = scl::one_block(path, &self.scl)?;
        scl::check_trip_dataset(&b)?;
        let scheme = self
            .scheme(b.min_time.ms, b.max_time.ms)
            .with_context(|| format!("{} of {}", scl::label(&b), path.display()))?;
        eprintln!("{}", describe(&b, &path.display().to_string()));
        Ok(Block {
            scheme,
            frame: self.frame(Identity {
                gocb_ref: b.gocb_ref,
                go_id: b.go_id,
                dat_set: b.dat_set,
                appid: b.appid,
                dst: b.dst_mac,
                vlan: b.vlan,
                conf_rev: b.conf_rev,
            }),
        })
    }

    /// The retransmission scheme with these times and the flags' burst and
    /// TAL factor.
    fn scheme(&self, min_ms: u32, max_ms: u32) -> anyhow::Result<Scheme> {
        let scheme = Scheme {
            min_ms,
            max_ms,
            burst: self.burst,
            tal_factor: self.tal_factor,
        };
        match scheme.problem() {
            Some(p) => bail!("the retransmission scheme: {p}"),
            None => Ok(scheme),
        }
    }

    /// The frame: a trip (false until the first change) and its quality;
    /// the counters, TAL and `t` are set per message.
    fn frame(&self, id: Identity) -> GooseFrame {
        GooseFrame {
            dst: id.dst,
            src: MacAddr([0x02, 0, 0, 0, 0, 0x01]),
            vlans: id.vlan.into_iter().collect(),
            appid: id.appid,
            reserved1: if self.simulation {
                hoptrace_sv::goose::RESERVED1_SIMULATION
            } else {
                0
            },
            reserved2: 0,
            pdu: GoosePdu {
                gocb_ref: id.gocb_ref,
                time_allowed_to_live_ms: 0,
                dat_set: id.dat_set,
                go_id: Some(id.go_id),
                t: UtcTime::default(),
                st_num: 0,
                sq_num: 0,
                simulation: self.simulation,
                conf_rev: id.conf_rev,
                nds_com: false,
                num_dat_set_entries: 2,
                all_data: vec![Data::Boolean(false), Data::quality(0)],
            },
        }
    }

    /// The instants of the state changes within `duration` after the
    /// start (ns, sorted).
    pub fn changes(&self, duration: u64) -> Vec<u64> {
        let mut at: Vec<u64> = match self.change_every {
            Some(every) if every > 0 => (1..)
                .map(|k| k * every)
                .take_while(|t| *t < duration)
                .collect(),
            _ => self.change_at.clone(),
        };
        at.retain(|t| *t > 0 && *t < duration);
        at.sort_unstable();
        at.dedup();
        at
    }
}

/// One line saying which block of which file is sent, and how.
fn describe(b: &SclGooseBlock, file: &str) -> String {
    let vlan = b.vlan.map_or("untagged".to_string(), |v| {
        format!("VLAN {} p{}", v.vid, v.pcp)
    });
    let time = |name: &str, t: hoptrace_scl::RetransmissionTime| {
        let source = if t.from_file { "" } else { " (default)" };
        format!("{name} {} ms{source}", t.ms)
    };
    format!(
        "GOOSE control block {} of {file}: gocbRef {}, goID {}, datSet {}, APPID 0x{:04X}, destination {}, {vlan}, confRev {}, {}, {}",
        scl::label(b),
        b.gocb_ref,
        b.go_id,
        b.dat_set,
        b.appid,
        b.dst_mac,
        b.conf_rev,
        time("MinTime", b.min_time),
        time("MaxTime", b.max_time),
    )
}

/// Whole milliseconds of `ns`, at least 1.
fn ms(ns: u64, flag: &str) -> anyhow::Result<u32> {
    if !ns.is_multiple_of(1_000_000) || ns == 0 {
        bail!("{flag}: GOOSE times are whole milliseconds (e.g. 2ms, 1s)");
    }
    u32::try_from(ns / 1_000_000).with_context(|| format!("{flag} is too long"))
}
