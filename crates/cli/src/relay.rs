//! `hoptrace relay`: the lab's protection relay (wiring only; the
//! function is `hoptrace_sv::protection`, the loop and its stamps
//! `hoptrace_endpoints::relay`).
//!
//! It subscribes to one SV stream, trips on instantaneous overcurrent on
//! one channel (`--pickup`) and publishes the trip as a GOOSE state change
//! (the control block of `--gocb-ref` ...), resetting once the current
//! has stayed below the pickup for `--reset`. Per trip it prints (and
//! writes with `--json`) the sample decided on and the relay's three
//! instants: the frame's kernel RX stamp, the decision, the trip's
//! kernel TX stamp. Exit 5 (partial) when samples of the stream were lost
//! or frames malformed: a fault may have gone unseen.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use hoptrace_endpoints::relay::{Change, RelayConfig, RelayReport};
use hoptrace_sv::protection::{Channel, Overcurrent};
use hoptrace_units::{arg, format_duration_ns};
use serde_json::json;

use crate::goose::block::{Block, BlockArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Interface the SV stream comes in on (AF_PACKET, needs CAP_NET_RAW).
    #[arg(long)]
    pub iface: String,
    /// Interface the GOOSE trips go out on (default: --iface).
    #[arg(long)]
    pub goose_iface: Option<String>,
    /// svID of the stream to protect (default: the first stream heard).
    #[arg(long)]
    pub svid: Option<String>,
    /// The stream's samples per second (its smpCnt wrap).
    #[arg(long, default_value_t = 4000, value_parser = arg::whole_rate)]
    pub rate: u32,
    /// The current channel watched: Ia, Ib, Ic or In.
    #[arg(long, default_value = "Ia")]
    pub channel: Channel,
    /// Trip at this instantaneous current, amperes (e.g. 500 or 500A).
    #[arg(long, value_parser = amperes)]
    pub pickup: f64,
    /// Consecutive samples at or above the pickup before tripping.
    #[arg(long, default_value_t = 1)]
    pub pickup_samples: u32,
    /// Reset after the current stayed below the pickup this long (more
    /// than half a cycle: a sine crosses zero twice per cycle).
    #[arg(long, default_value = "20ms", value_parser = arg::duration_ns)]
    pub reset: u64,
    /// The GOOSE control block the trips are published in.
    #[command(flatten)]
    pub block: BlockArgs,
    /// Stop after this long (e.g. 10s); without it, at Ctrl-C.
    #[arg(long, value_parser = arg::duration)]
    pub duration: Option<Duration>,
    /// Write the trips and counts as JSON to FILE (new; an existing one only
    /// with --force).
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub force: crate::outputs::ForceArg,
}

/// `500`, `500A`, `1.5kA`.
fn amperes(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = if let Some(k) = t.strip_suffix("kA") {
        (k, 1000.0)
    } else {
        (t.strip_suffix('A').unwrap_or(t), 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v * scale),
        _ => Err(format!("{s:?}: a current above 0, e.g. 500A or 1.5kA")),
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.block.change_every.is_some() || !args.block.change_at.is_empty() {
        bail!("the relay changes its state on its decisions: --change-every and --change-at are for `goose publish`");
    }
    crate::outputs::claim_files("relay", &[args.json.as_deref()], &[], args.force.force)?;
    let reset_samples = (args.reset as u128 * args.rate as u128).div_ceil(1_000_000_000);
    let function = Overcurrent::new(
        args.channel,
        args.pickup,
        args.pickup_samples,
        u32::try_from(reset_samples.max(1)).context("--reset is too long")?,
    )
    .map_err(anyhow::Error::msg)?;
    let Block { frame, scheme } = args.block.resolve()?;
    let gocb_ref = frame.pdu.gocb_ref.clone();
    let cfg = RelayConfig {
        sv_iface: args.iface.clone(),
        goose_iface: args
            .goose_iface
            .clone()
            .unwrap_or_else(|| args.iface.clone()),
        sv_id: args.svid.clone(),
        wrap: args.rate,
        function,
        frame,
        scheme,
        duration: args.duration,
    };
    let stop = hoptrace_os::stop_flag()?;
    let r = hoptrace_endpoints::relay::run(cfg, &stop, || {
        eprintln!(
            "relay ready: SV on {}, {} >= {} A trips, GOOSE {} on {}",
            args.iface,
            args.channel.name(),
            args.pickup,
            gocb_ref,
            args.goose_iface.as_deref().unwrap_or(&args.iface)
        )
    })?;
    let out = std::io::stdout();
    let mut out = out.lock();
    for (i, c) in r.changes.iter().enumerate() {
        writeln!(out, "{}", change_line(i, c, r.sv_id.as_deref()))?;
    }
    writeln!(out, "{}", summary(&r))?;
    write!(out, "{}", r.link_downs.lines())?;
    if let Some(path) = &args.json {
        let v = json!({
            "sv_id": r.sv_id, "channel": args.channel.name(), "pickup_a": args.pickup,
            "rate": args.rate, "gocb_ref": gocb_ref, "changes": r.changes,
            "counters": {
                "frames": r.frames, "other_stream_frames": r.other_stream_frames,
                "malformed": r.malformed, "samples": r.function.samples,
                "samples_not_used": r.function.not_used, "samples_lost": r.samples_lost,
                "samples_duplicated": r.samples_duplicated, "trips": r.function.trips,
                "resets": r.function.resets, "goose_sent": r.goose_sent,
                "goose_send_errors": r.goose_send_errors,
            },
            "link_downs": r.link_downs.json(),
        });
        std::fs::write(path, serde_json::to_vec_pretty(&v)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if r.samples_lost > 0 || r.malformed > 0 {
        return Ok(hoptrace_os::Exit::Partial.into());
    }
    Ok(ExitCode::SUCCESS)
}

fn change_line(i: usize, c: &Change, sv_id: Option<&str>) -> String {
    let first = if c.kind == "trip" {
        format!("; first above the pickup: smpCnt {}", c.first_above.smp_cnt)
    } else {
        String::new()
    };
    format!(
        "{} {} on {} smpCnt {} (seq {}{first}): received -> decided {}, decided -> sent {}, received -> sent {} (GOOSE stNum {}, {})",
        c.kind,
        i + 1,
        sv_id.unwrap_or("?"),
        c.on.smp_cnt,
        c.on.seq,
        format_duration_ns(c.decided_ns - c.rx_ns),
        format_duration_ns(c.sent_ns - c.decided_ns),
        format_duration_ns(c.sent_ns - c.rx_ns),
        c.st_num,
        if c.sent_is_kernel_stamp {
            "kernel TX stamp"
        } else {
            "no kernel TX stamp: the time before the send"
        }
    )
}

fn summary(r: &RelayReport) -> String {
    format!(
        "relay: {} frames of {} ({} samples, {} not used for their quality, {} lost, {} duplicated), {} trips, {} resets, {} GOOSE messages sent ({} send errors); {} frames of other streams, {} malformed",
        r.frames,
        r.sv_id.as_deref().unwrap_or("no stream"),
        r.function.samples,
        r.function.not_used,
        r.samples_lost,
        r.samples_duplicated,
        r.function.trips,
        r.function.resets,
        r.goose_sent,
        r.goose_send_errors,
        r.other_stream_frames,
        r.malformed
    )
}

#[cfg(test)]
mod tests {
    use super::amperes;

    #[test]
    fn a_pickup_is_read_in_amperes_or_kiloamperes() {
        assert_eq!(amperes("500"), Ok(500.0));
        assert_eq!(amperes("500A"), Ok(500.0));
        assert_eq!(amperes("1.5kA"), Ok(1500.0));
        assert!(amperes("0A").is_err());
        assert!(amperes("five").is_err());
    }
}
