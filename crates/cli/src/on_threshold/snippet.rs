//! A snippet as a pcapng file: every frame with its stamps in its packet
//! comment (`opt_comment`, Wireshark's `frame.comment`), the exceeding
//! frames marked `EXCEEDS`.
//!
//! The frames' identity (svID and smpCnt of each ASDU, refrTm when the
//! publisher sent one) is decoded here from the bytes kept, off the
//! receive path. A frame's packet time is its kernel RX stamp (T3), or the
//! application's stamp (T4) when it has none. Comments read, e.g.:
//!
//! `hoptrace sv subscribe: svID=MU01 smpCnt=1234; t_rx=1764285696123456789
//! t_app=1764285696125456789 ns (CLOCK_REALTIME); rx..app=2.001 ms; EXCEEDS
//! --threshold 2 ms (exceedance 1 of 3 in this snippet)`
//!
//! A frame the snippet took from the ring, before its first exceedance,
//! that was over the threshold too is not marked `EXCEEDS`: it was counted
//! before this snippet opened (in an earlier snippet, or as not kept).

use hoptrace_pcap::{CaptureFormat, CaptureWriter};
use hoptrace_units::format_duration_ns;

use super::ring::{Slot, Snippet};

/// Who writes the snippet, and against what.
#[derive(Debug, Clone)]
pub struct Context {
    /// `sv subscribe`.
    pub command: &'static str,
    /// `rx..app`.
    pub stage: &'static str,
    pub threshold_ns: u64,
    /// The stamps' clock (`CLOCK_REALTIME`).
    pub clock: String,
    /// Frames kept on each side (`pcap:N`).
    pub window: usize,
    /// Where the exceedance's explanation is (`--explain`), if anywhere.
    pub explained_in: Option<String>,
}

/// One exceedance kept, for the summary and the `exec:` environment (its
/// type is the summary file's).
pub use hoptrace_record::threshold_summary::Exceedance;

/// The identity of a kept frame: the comment's words for it, and its
/// first ASDU's svID, smpCnt and refrTm (ns).
fn identity(data: &[u8]) -> (String, Option<String>, Option<u16>, Option<i64>) {
    let Ok(frame) = hoptrace_sv::decode(data) else {
        return ("not a decodable SV frame".into(), None, None, None);
    };
    let mut words = Vec::new();
    let mut first = None;
    for a in frame.asdus() {
        let sv_id = String::from_utf8_lossy(a.sv_id).into_owned();
        words.push(format!("svID={sv_id} smpCnt={}", a.smp_cnt));
        let refr = a.refr_tm.map(hoptrace_endpoints::publisher::refrtm_ns);
        first.get_or_insert((sv_id, a.smp_cnt, refr));
    }
    match first {
        Some((sv_id, smp_cnt, refr)) => (words.join(", "), Some(sv_id), Some(smp_cnt), refr),
        None => ("an SV frame without ASDUs".into(), None, None, None),
    }
}

/// The packet comment of `slot`; `nth` = (its exceedance's number, the
/// snippet's count) when it is one.
pub fn comment(ctx: &Context, slot: &Slot, nth: Option<(u64, u64)>) -> String {
    let (words, _, _, refr) = identity(&slot.data);
    let mut c = format!("hoptrace {}: {words}; ", ctx.command);
    match slot.t_rx {
        Some(t_rx) => {
            c += &format!(
                "t_rx={t_rx} t_app={} ns ({}); {}={}",
                slot.t_app,
                ctx.clock,
                ctx.stage,
                format_duration_ns(slot.t_app - t_rx)
            )
        }
        None => {
            c += &format!(
                "no RX stamp, t_app={} ns ({}); not judged",
                slot.t_app, ctx.clock
            )
        }
    }
    if let Some(r) = refr {
        c += &format!(
            "; t_app-refrTm={} (end to end, from the publisher's refrTm)",
            format_duration_ns(slot.t_app - r)
        );
    }
    if slot.truncated {
        c += "; truncated: longer than the receive buffer";
    }
    match nth {
        Some((i, n)) => {
            c += &format!(
                "; EXCEEDS --threshold {} (exceedance {i} of {n} in this snippet",
                format_duration_ns(ctx.threshold_ns)
            );
            if i > 1 {
                c += &format!(
                    ": within the {} frames after the previous one, joined",
                    ctx.window
                );
            }
            c += ")";
            if let (1, Some(at)) = (i, &ctx.explained_in) {
                c += &format!("; its explanation: {at}");
            }
        }
        None if slot.exceeds => {
            c += "; over the threshold too, counted before this snippet opened";
        }
        None => {}
    }
    c
}

/// The note on a snippet's last frame: why it ends where it does.
fn ending(ctx: &Context, s: &Snippet) -> Option<String> {
    if s.cut {
        Some(format!(
            "snippet full ({} frames) while exceedances went on: they continue in the next snippet",
            s.frames().len()
        ))
    } else if s.ended_early {
        Some(format!(
            "the run ended before {} frames came after the last exceedance",
            ctx.window
        ))
    } else {
        None
    }
}

/// `s` as a pcapng file in memory, and its exceedances.
pub fn encode(ctx: &Context, s: &Snippet) -> Result<(Vec<u8>, Vec<Exceedance>), String> {
    let mut w = CaptureWriter::new(Vec::new(), CaptureFormat::PcapNg).map_err(|e| e.to_string())?;
    let mut found = Vec::new();
    let frames = s.frames();
    for (i, slot) in frames.iter().enumerate() {
        let nth = slot.counted().then(|| {
            found.push(i);
            (found.len() as u64, s.exceedances)
        });
        let mut c = comment(ctx, slot, nth);
        if i + 1 == frames.len() {
            if let Some(e) = ending(ctx, s) {
                c += &format!("; {e}");
            }
        }
        let t = slot.t_rx.unwrap_or(slot.t_app).max(0) as u64;
        w.write_commented(t, &slot.data, Some(&c))
            .map_err(|e| e.to_string())?;
    }
    let bytes = w.finish().map_err(|e| e.to_string())?;
    let exceedances = found
        .into_iter()
        .map(|i| {
            let slot = &frames[i];
            let (_, sv_id, smp_cnt, _) = identity(&slot.data);
            let t_rx = slot.t_rx.unwrap_or(slot.t_app);
            Exceedance {
                frame: i + 1,
                sv_id,
                smp_cnt,
                t_rx_ns: t_rx,
                t_app_ns: slot.t_app,
                latency_ns: slot.t_app - t_rx,
            }
        })
        .collect();
    Ok((bytes, exceedances))
}

/// `<UTC time>-<svID>-<smpCnt>.pcapng` of the first exceedance (the svID
/// kept to letters, digits, `.`, `_` and `-`, at most 64 of them).
pub fn file_name(first: &Exceedance) -> String {
    let secs = first.t_rx_ns.div_euclid(1_000_000_000);
    let nanos = first.t_rx_ns.rem_euclid(1_000_000_000) as u32;
    let time = chrono::DateTime::from_timestamp(secs, nanos).map_or_else(
        || first.t_rx_ns.to_string(),
        |t| t.format("%Y%m%dT%H%M%S%.9fZ").to_string(),
    );
    let sv_id: String = first
        .sv_id
        .as_deref()
        .unwrap_or("malformed")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let smp = first
        .smp_cnt
        .map_or_else(|| "none".into(), |n| n.to_string());
    format!("{time}-{sv_id}-{smp}.pcapng")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::on_threshold::ring::Watch;
    use hoptrace_endpoints::subscriber::SeenFrame;

    fn ctx() -> Context {
        Context {
            command: "sv subscribe",
            stage: "rx..app",
            threshold_ns: 2_000_000,
            clock: "CLOCK_REALTIME".into(),
            window: 2,
            explained_in: Some("explain/ of the recording".into()),
        }
    }

    fn sv_frame(sv_id: &str, smp_cnt: u16) -> Vec<u8> {
        let frame = hoptrace_sv::OwnedSvFrame {
            appid: 0x4000,
            asdus: vec![hoptrace_sv::OwnedAsdu {
                sv_id: sv_id.as_bytes().to_vec(),
                smp_cnt,
                seq_data: vec![0; 64],
                ..Default::default()
            }],
            ..Default::default()
        };
        hoptrace_sv::encode(&frame).unwrap()
    }

    #[test]
    fn the_snippet_file_reads_back_with_every_frame_commented_and_the_exceeding_ones_marked() {
        let mut w = Watch::new(
            2_000_000,
            (2, crate::on_threshold::ring::capacity(2)),
            10,
            false,
        );
        let mut closed = None;
        for i in 0..10u16 {
            let data = sv_frame("MU/01", i);
            let late = [4, 5].contains(&i);
            let t_app = 1_764_285_696_000_000_000 + i as i64 * 250_000;
            let f = SeenFrame {
                data: &data,
                t_rx: Some(t_app - if late { 3_000_000 } else { 40_000 }),
                t_app,
                truncated: false,
            };
            closed = closed.or(w.offer(&f));
        }
        let s = closed.expect("closed after 2 frames past smpCnt 5");
        let (bytes, ex) = encode(&ctx(), &s).unwrap();
        let got: Vec<_> = hoptrace_pcap::CaptureReader::from_bytes(bytes)
            .unwrap()
            .map(|p| p.unwrap().comments)
            .collect();
        assert_eq!(got.len(), 6, "2 before, 2 exceeding, 2 after");
        assert!(got.iter().all(|c| c.len() == 1));
        for (i, c) in got.iter().enumerate() {
            let smp = i + 2;
            assert!(c[0].contains(&format!("svID=MU/01 smpCnt={smp};")), "{c:?}");
            assert_eq!(c[0].contains("EXCEEDS"), smp == 4 || smp == 5, "{c:?}");
        }
        assert!(got[2][0].contains("rx..app=3.000 ms; EXCEEDS --threshold 2.000 ms (exceedance 1 of 2 in this snippet); its explanation: explain/"), "{:?}", got[2]);
        assert!(got[3][0].contains("(exceedance 2 of 2 in this snippet: within the 2 frames after the previous one, joined)"), "{:?}", got[3]);
        let smp: Vec<_> = ex
            .iter()
            .map(|e| (e.frame, e.smp_cnt, e.latency_ns))
            .collect();
        assert_eq!(smp, [(3, Some(4), 3_000_000), (4, Some(5), 3_000_000)]);
        assert_eq!(
            file_name(&ex[0]),
            "20251127T232135.998000000Z-MU_01-4.pcapng"
        );
    }
}
