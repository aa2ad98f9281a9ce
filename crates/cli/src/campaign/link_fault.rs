//! The plan's link faults (`[[fault]] link_down = "subscriber"`, `for`):
//! the subscriber's interface set down, in its namespace, and up again
//! `for` later, as a flapping link on the path would.
//!
//! Mechanism: each change is journaled (`link`, [`Event::Link`]) before it
//! is made, so the journal holds the outage even when the supervisor dies
//! inside it. The set-up times still to come are kept in [`LinkFaults`];
//! the supervisor's loop calls [`LinkFaults::due`] every tick. A link
//! must never stay down after the supervisor: when it stops (the end, a
//! signal) the links it holds down go up first ([`LinkFaults::up_all`]),
//! and a supervisor that resumes a campaign whose journal ends inside an
//! outage sets that link up at once ([`LinkFaults::resume`]). The
//! subscriber survives the outage (its receive path reports the interface
//! down and receives again when it is up); the report counts the samples
//! lost in it apart ([`hoptrace_campaign::measure`]).

use std::process::Stdio;

use anyhow::{bail, Context, Result};
use hoptrace_campaign::journal::{Event, Journal, JournalState};
use hoptrace_campaign::plan::Plan;
use hoptrace_record::realtime_now_ns;

/// The namespace and name of `component`'s interface.
fn interface_of(plan: &Plan, component: &str) -> Option<(Option<String>, String)> {
    let sv = plan.sv.as_ref()?;
    let e = match component {
        "subscriber" => &sv.subscriber,
        "publisher" => &sv.publisher,
        _ => return None,
    };
    Some((e.netns.clone(), e.iface.clone()))
}

/// `ip [-n NS] link set dev IFACE up|down`.
fn set_link(netns: Option<&str>, iface: &str, up: bool) -> Result<()> {
    let mut cmd = std::process::Command::new("ip");
    if let Some(ns) = netns {
        cmd.args(["-n", ns]);
    }
    let state = if up { "up" } else { "down" };
    let out = cmd
        .args(["link", "set", "dev", iface, state])
        .stdin(Stdio::null())
        .output()
        .context("running ip (iproute2)")?;
    if !out.status.success() {
        bail!(
            "ip link set dev {iface} {state}{}: {}",
            netns
                .map(|n| format!(" (namespace {n})"))
                .unwrap_or_default(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The links held down, and when each goes up again.
#[derive(Default)]
pub(super) struct LinkFaults {
    /// (up at ns, component).
    down: Vec<(i64, String)>,
}

impl LinkFaults {
    fn change(journal: &mut Journal, plan: &Plan, component: &str, up: bool) -> Result<()> {
        let Some((netns, iface)) = interface_of(plan, component) else {
            bail!("the plan has no interface for {component}");
        };
        journal.append(&Event::Link {
            at_ns: realtime_now_ns(),
            component: component.into(),
            iface: iface.clone(),
            up,
        })?;
        eprintln!(
            "hoptrace campaign: fault: {component}'s link {iface} {}",
            if up { "up again" } else { "down" }
        );
        set_link(netns.as_deref(), &iface, up)
    }

    /// Set `component`'s link down now, up again at `up_at_ns`.
    pub fn down(
        &mut self,
        journal: &mut Journal,
        plan: &Plan,
        component: &str,
        up_at_ns: i64,
    ) -> Result<()> {
        Self::change(journal, plan, component, false)?;
        self.down.push((up_at_ns, component.into()));
        Ok(())
    }

    /// Set up the links whose time down is over.
    pub fn due(&mut self, journal: &mut Journal, plan: &Plan) -> Result<()> {
        let now = realtime_now_ns();
        while let Some(i) = self.down.iter().position(|(t, _)| *t <= now) {
            let (_, c) = self.down.remove(i);
            Self::change(journal, plan, &c, true)?;
        }
        Ok(())
    }

    /// Set up every link held down (the supervisor stops).
    pub fn up_all(&mut self, journal: &mut Journal, plan: &Plan) -> Result<()> {
        for (_, c) in std::mem::take(&mut self.down) {
            Self::change(journal, plan, &c, true)?;
        }
        Ok(())
    }

    /// A resumed campaign whose journal ends inside an outage: that link
    /// up at once (its planned time up has passed or is lost with the
    /// supervisor that held it).
    pub fn resume(journal: &mut Journal, plan: &Plan, state: &JournalState) -> Result<()> {
        for o in state.outages.iter().filter(|o| o.to_ns.is_none()) {
            Self::change(journal, plan, &o.component, true)?;
        }
        Ok(())
    }
}
