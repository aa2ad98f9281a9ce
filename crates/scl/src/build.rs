//! One control block + its SMV address -> one [`StreamSpec`].
//!
//! Steps, each collecting every problem it finds rather than stopping at
//! the first (a user fixes a file in one pass):
//! 1. the SampledValueControl's attributes (smvID, nofASDU and smpRate are
//!    required; confRev defaults to 1 with a warning; smpMod to
//!    SmpPerPeriod) and its SmvOpts;
//! 2. the DataSet its `datSet` names, in the same LN0;
//! 3. exactly one SMV address for it ([`find_address`], which reads it
//!    with `read_address`);
//! 4. [`StreamSpec::validate`], each error placed on the element or
//!    attribute its value came from.

use hoptrace_sv::{AsduFields, SmpMod, SpecError, SpecWarning, StreamSpec};
use roxmltree::Node;

use crate::address::{find_address, Address, AddressIndex};
use crate::control::{dataset_info, find_dataset, DataSetInfo, FoundCb};
use crate::error::Problem;
use crate::xml::{attr, parse_bool, SclDoc};
use crate::SclStream;

/// The SampledValueControl attributes, parsed.
struct CbAttributes {
    sv_id: String,
    dat_set: Option<String>,
    conf_rev: u32,
    smp_rate: u16,
    smp_mod: SmpMod,
    asdus_per_frame: u8,
    fields: AsduFields,
    security: bool,
}

/// Builds the stream of `found`, or says everything wrong with it.
pub fn build_stream(
    scl: &SclDoc<'_>,
    found: &FoundCb<'_, '_>,
    smvs: &AddressIndex<'_, '_>,
    nominal_frequency_hz: u16,
    warnings: &mut Vec<Problem>,
) -> Result<SclStream, Vec<Problem>> {
    let mut problems = Vec::new();
    let attrs = read_attributes(scl, found, &mut problems, warnings);
    let dataset =
        find_dataset(scl, found, &mut problems).map(|d| d.map(|node| dataset_info(scl, node)));
    let address = find_address(scl, found, smvs, &mut problems);
    let (Some(attrs), Some(dataset), Some(address)) = (attrs, dataset, address) else {
        return Err(problems);
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    // smpMod defaults to samples per period: a rate per second written
    // without its mode means thousands of samples per period.
    let mode_hint = (attr(found.node, "smpMod").is_none()
        && attrs.smp_rate > MAX_SAMPLES_PER_PERIOD)
        .then(|| {
            format!(
                "smpRate {} with no smpMod means {} samples per period (SmpPerPeriod, the default); a rate per second needs smpMod=\"SmpPerSec\"",
                attrs.smp_rate, attrs.smp_rate
            )
        });
    let spec = StreamSpec {
        sv_id: attrs.sv_id,
        dat_set: attrs
            .dat_set
            .map(|d| format!("{}/LLN0${d}", found.cb.ld_name)),
        appid: address.appid,
        dst_mac: address.mac,
        vlan: address.vlan,
        conf_rev: attrs.conf_rev,
        smp_synch: None,
        smp_rate: attrs.smp_rate,
        smp_mod: attrs.smp_mod,
        nominal_frequency_hz,
        asdus_per_frame: attrs.asdus_per_frame,
        simulation: false,
        security: attrs.security,
        asdu_fields: attrs.fields,
    };
    let place = |field: &str| -> (Node<'_, '_>, Option<&'static str>) {
        match field {
            "APPID" => (address.appid_node, None),
            "destination MAC" => (address.mac_node, None),
            "VLAN id" | "VLAN priority" | "VLAN" => (address.vlan_node.unwrap_or(found.node), None),
            "svID" => (found.node, Some("smvID")),
            "datSet" => (found.node, Some("datSet")),
            "smpRate" => (found.node, Some("smpRate")),
            "nofASDU" => (found.node, Some("nofASDU")),
            _ => (found.node, None),
        }
    };
    match spec.validate() {
        Err(errors) => Err(errors
            .iter()
            .map(|e: &SpecError| {
                let (node, attr) = place(e.field());
                let message = match (&mode_hint, e.field()) {
                    (Some(h), "smpRate") => format!("{e}: {h}"),
                    _ => e.to_string(),
                };
                scl.problem(node, attr, Some(&found.cb), message)
            })
            .collect()),
        Ok(spec_warnings) => {
            for w in &spec_warnings {
                let w: &SpecWarning = w;
                let (node, attr) = place(w.field());
                warnings.push(scl.problem(node, attr, Some(&found.cb), w.to_string()));
            }
            if let Some(h) = mode_hint {
                warnings.push(scl.problem(found.node, Some("smpRate"), Some(&found.cb), h));
            }
            Ok(stream(scl, found, spec, dataset, &address))
        }
    }
}

fn stream(
    scl: &SclDoc<'_>,
    found: &FoundCb<'_, '_>,
    spec: StreamSpec,
    dataset: Option<DataSetInfo>,
    address: &Address<'_, '_>,
) -> SclStream {
    SclStream {
        spec,
        control_block: found.cb.clone(),
        location: scl.location(found.node.range().start),
        smv_location: scl.location(address.element.range().start),
        subnetwork: address.subnetwork.clone(),
        dataset,
    }
}

/// `multicast="false"`: a unicast control block, whose destination a
/// client sets at run time (no SMV address in SCL). `Err`: the attribute's
/// value is no boolean (the message to place on it).
pub fn is_unicast(found: &FoundCb<'_, '_>) -> Result<bool, String> {
    match attr(found.node, "multicast") {
        None => Ok(false),
        Some(v) => parse_bool(v)
            .map(|m| !m)
            .map_err(|m| format!("multicast {m}")),
    }
}

fn read_attributes(
    scl: &SclDoc<'_>,
    found: &FoundCb<'_, '_>,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) -> Option<CbAttributes> {
    let node = found.node;
    let before = problems.len();
    let mut bad = |name: &'static str, message: String| {
        let at = attr(node, name).map(|_| name);
        problems.push(scl.problem(node, at, Some(&found.cb), message));
    };
    let required = |name: &'static str, bad: &mut dyn FnMut(&'static str, String)| {
        let v = attr(node, name);
        if v.is_none() {
            bad(
                name,
                format!(
                    "no {name} attribute: it is required ({})",
                    required_hint(name)
                ),
            );
        }
        v
    };
    if attr(node, "name").is_none_or(str::is_empty) {
        bad(
            "name",
            "no name: a control block needs one (e.g. name=\"MSVCB01\")".into(),
        );
    }
    let sv_id = required("smvID", &mut bad).map(str::to_string);
    let smp_rate = required("smpRate", &mut bad).and_then(|v| match v.trim().parse::<u32>() {
        Ok(r) if r <= u16::MAX as u32 => Some(r as u16),
        Ok(r) => {
            bad("smpRate", format!("smpRate {r} does not fit the 16-bit smpRate field (at most 65535)"));
            None
        }
        Err(_) => {
            bad("smpRate", format!("smpRate `{v}` is not a whole number (80 for 9-2LE protection, 256 for metering)"));
            None
        }
    });
    let asdus = required("nofASDU", &mut bad).and_then(|v| match v.trim().parse::<u32>() {
        Ok(n) if n <= u8::MAX as u32 => Some(n as u8),
        Ok(n) => {
            bad(
                "nofASDU",
                SpecError::AsdusPerFrameOutOfRange { count: n }.to_string(),
            );
            None
        }
        Err(_) => {
            bad(
                "nofASDU",
                format!("nofASDU `{v}` is not a whole number: use 1 to 8"),
            );
            None
        }
    });
    let conf_rev = match attr(node, "confRev") {
        None => {
            warnings.push(
                scl.problem(
                    node,
                    None,
                    Some(&found.cb),
                    "no confRev: 1 assumed (relays drop frames whose confRev differs from theirs)"
                        .into(),
                ),
            );
            Some(1)
        }
        Some(v) => v
            .trim()
            .parse::<u32>()
            .map_err(|_| {
                bad(
                    "confRev",
                    format!("confRev `{v}` is not a whole number from 0 to 4294967295"),
                );
            })
            .ok(),
    };
    let smp_mod = match attr(node, "smpMod") {
        None => Some(SmpMod::SamplesPerPeriod),
        Some(v) => SmpMod::from_scl_name(v.trim()).or_else(|| {
            bad(
                "smpMod",
                format!("smpMod `{v}` is not SmpPerPeriod, SmpPerSec or SecPerSmp"),
            );
            None
        }),
    };
    let dat_set = attr(node, "datSet").map(str::to_string);
    let (fields, security) = read_smv_opts(scl, found, problems, warnings);
    if problems.len() > before {
        return None;
    }
    Some(CbAttributes {
        sv_id: sv_id?,
        dat_set,
        conf_rev: conf_rev?,
        smp_rate: smp_rate?,
        smp_mod: smp_mod?,
        asdus_per_frame: asdus?,
        fields,
        security,
    })
}

/// The most samples per period a merging unit sends (IEC 61869-9 and
/// 9-2LE use 80 or 256; 288 at 60 Hz for some profiles): a larger smpRate
/// without smpMod is a per-second rate written without its mode.
const MAX_SAMPLES_PER_PERIOD: u16 = 512;

fn required_hint(attr: &str) -> &'static str {
    match attr {
        "smvID" => "the svID every frame carries",
        "smpRate" => "80 for 9-2LE protection, 256 for metering",
        "nofASDU" => "ASDUs per frame: 1 at 80 samples/period, 8 at 256",
        _ => "see IEC 61850-6",
    }
}

/// SmvOpts: which optional fields the frames carry. Edition 1 spells
/// `dataSet` as `dataRef`; `sampleSynchronized` is ignored (smpSynch is in
/// every 9-2 frame).
fn read_smv_opts(
    scl: &SclDoc<'_>,
    found: &FoundCb<'_, '_>,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) -> (AsduFields, bool) {
    let Some(opts) = scl.child(found.node, "SmvOpts") else {
        warnings.push(scl.problem(
            found.node,
            None,
            Some(&found.cb),
            "no <SmvOpts>: frames without datSet, refrTm, smpRate or security assumed".into(),
        ));
        return (AsduFields::default(), false);
    };
    let mut flag = |name: &'static str| match attr(opts, name) {
        None => false,
        Some(v) => parse_bool(v).unwrap_or_else(|m| {
            problems.push(scl.problem(opts, Some(name), Some(&found.cb), format!("{name} {m}")));
            false
        }),
    };
    let fields = AsduFields {
        dat_set: flag("dataSet") | flag("dataRef"),
        refr_tm: flag("refreshTime"),
        smp_rate: flag("sampleRate"),
    };
    (fields, flag("security"))
}
