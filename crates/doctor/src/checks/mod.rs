//! The checks, one module per area; each module's `checks()` is its part
//! of the catalogue (see [`mod@crate::catalogue`]). Helpers shared by several
//! areas live here.

pub mod cpu;
pub mod domain_cpu;
pub mod domain_devices;
pub mod domain_live;
pub mod housekeeping;
pub mod irq;
pub mod kernel;
pub mod memory;
pub mod observed;
pub mod path;
pub mod platform;

use crate::catalogue::Outcome;
use crate::context::Ctx;
use crate::cpulist::CpuSet;
use crate::root::Unreadable;

/// The RT CPUs, or the outcome to return when there are none (n/a: nothing
/// to keep off them) or they cannot be read (unknown).
pub(crate) fn rt_cpus(ctx: &Ctx) -> Result<CpuSet, Outcome> {
    let iso = ctx.isolation().map_err(Outcome::unknown)?;
    if iso.rt.is_empty() {
        return Err(Outcome::not_applicable(
            "no RT CPU (none isolated, none nohz_full): nothing to keep off them; fix cpu.isolcpus first",
        ));
    }
    Ok(iso.rt.clone())
}

/// An integer sysctl-style file, or the unknown outcome naming it.
pub(crate) fn int_file(ctx: &Ctx, path: &str) -> Result<i64, Outcome> {
    ctx.root.read_i64(path).map_err(Outcome::unknown)
}

/// For a file that only exists with a kernel option, read and failed with
/// `err`: when it is missing and the kernel configuration says the option
/// is off, the feature cannot run (pass, said so); otherwise unknown.
pub(crate) fn absent_feature(ctx: &Ctx, err: Unreadable, option: &str, what: &str) -> Outcome {
    if !err.is_missing() {
        return Outcome::unknown(err);
    }
    match ctx.kconfig() {
        Ok(k) if !k.enabled(option) => Outcome::pass(format!(
            "{what} not built (CONFIG_{option} unset in {}; no {})",
            k.source, err.path
        )),
        Ok(k) => Outcome::unknown(format!(
            "{err}, although CONFIG_{option} is set in {}",
            k.source
        )),
        Err(k) => Outcome::unknown(format!("{err}; and {k}")),
    }
}

/// A cpumask file (hex) compared with the RT CPUs: pass when it holds none.
pub(crate) fn mask_without_rt(ctx: &Ctx, path: &str, what: &str) -> Outcome {
    let rt = match rt_cpus(ctx) {
        Ok(rt) => rt,
        Err(o) => return o,
    };
    let text = match ctx.root.read_trim(path) {
        Ok(t) => t,
        Err(e) => return Outcome::unknown(e),
    };
    let mask = match CpuSet::parse_mask(&text) {
        Ok(m) => m,
        Err(e) => return Outcome::unknown(format!("{path}: {e}")),
    };
    let on_rt = mask.intersection(&rt);
    if on_rt.is_empty() {
        Outcome::pass(format!("{what} on CPUs {mask} (RT CPUs {rt} excluded)"))
    } else {
        Outcome::fail(format!(
            "{what} may run on RT CPUs {on_rt} ({path} = {text}, CPUs {mask})"
        ))
    }
}
