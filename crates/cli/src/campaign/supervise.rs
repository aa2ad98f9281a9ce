//! The campaign supervisor: starts the plan's components, watches them,
//! restarts the one that dies, and keeps the journal and the heartbeat.
//!
//! Mechanism: one loop, ticking every 100 ms on the main thread. Each
//! component is a [`Slot`]: its running child (a process of its own
//! process group, so that a Ctrl-C reaches only the supervisor, with
//! PR_SET_PDEATHSIG SIGTERM, so that a killed supervisor takes its
//! children down cleanly and they write their files), or the time it
//! starts again. A tick: a child that exited is journaled (`exit`,
//! unexpected) and restarted after the plan's `restart_delay` with the
//! next run number (`hoptrace_campaign::spec`: the subscriber resumes its
//! recording); a fault of the plan that is due is injected (SIGKILL, or a
//! link set down and up again, [`super::link_fault`]); the
//! heartbeat is rewritten when due (`DIR/heartbeat.json`, written to a
//! temporary file then renamed); the hourly doctor snapshot is taken when
//! due (about a second, `doctor --json`, during which the loop waits: a
//! death then is seen a second late, its gap is as long as it was). Every journal line is fsynced before the supervisor acts on
//! it. At the end (the planned duration, from the campaign's first start
//! in wall-clock time, so a resumed campaign ends when it was planned to)
//! the publisher is stopped first (SIGINT), the others half a second later
//! so the last samples are received, each SIGKILLed after 15 s; then the
//! end doctor snapshot, the `stop` event, and the report. SIGINT or
//! SIGTERM stops the same way but journals an incomplete stop: `--resume`
//! continues it.

use std::path::{Path, PathBuf};
use std::process::{Child, ExitCode, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hoptrace_campaign::journal::{replay, Event, Journal, JournalState};
use hoptrace_campaign::plan::{FaultAction, Plan};
use hoptrace_campaign::spec::{spec, Spec};
use hoptrace_campaign::{dirs, report};
use hoptrace_record::realtime_now_ns;

use super::link_fault::LinkFaults;
use super::RunArgs;

const TICK: Duration = Duration::from_millis(100);
/// How long a component has to stop after SIGINT before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(15);

struct Slot {
    name: &'static str,
    child: Option<(Child, u32)>,
    next_run: u32,
    start_at: Option<Instant>,
}

struct Supervisor {
    plan: Plan,
    dir: PathBuf,
    exe: PathBuf,
    journal: Journal,
    end_ns: i64,
    slots: Vec<Slot>,
    links: LinkFaults,
}

fn status_text(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(sig)) => format!("signal {sig}"),
        _ => "unknown".into(),
    }
}

fn remaining(end_ns: i64) -> Duration {
    Duration::from_nanos((end_ns - realtime_now_ns()).max(0) as u64)
}

/// Spawn `s` in a process group of its own, killed with SIGTERM when the
/// supervisor dies, its output appended to its log.
fn spawn(s: &Spec) -> Result<Child> {
    use std::os::unix::process::CommandExt;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&s.log)
        .with_context(|| format!("opening {}", s.log.display()))?;
    let mut cmd = std::process::Command::new(&s.program);
    cmd.args(&s.args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: between fork and exec only async-signal-safe calls (setpgid,
    // prctl) are made, and nothing is allocated.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setpgid(0, 0) != 0
                || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
        .with_context(|| format!("starting {} ({})", s.component, s.program.display()))
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on a pid this process started and has not reaped.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

impl Supervisor {
    fn log(&mut self, e: Event) -> Result<()> {
        self.journal.append(&e).map_err(Into::into)
    }

    fn start(&mut self, i: usize) -> Result<()> {
        let name = self.slots[i].name;
        let run = self.slots[i].next_run;
        let s = spec(
            &self.plan,
            &self.dir,
            &self.exe,
            name,
            run,
            remaining(self.end_ns),
        );
        let child = spawn(&s)?;
        let pid = child.id();
        self.slots[i].child = Some((child, run));
        self.slots[i].next_run += 1;
        self.slots[i].start_at = None;
        self.log(Event::Start {
            at_ns: realtime_now_ns(),
            component: name.into(),
            run,
            pid,
        })
    }

    /// One tick's watching: exits journaled, restarts when due.
    fn watch(&mut self) -> Result<()> {
        for i in 0..self.slots.len() {
            let slot = &mut self.slots[i];
            if let Some((child, run)) = slot.child.as_mut() {
                if let Some(st) = child.try_wait()? {
                    let run = *run;
                    slot.child = None;
                    slot.start_at = Some(Instant::now() + self.plan.campaign.restart_delay);
                    let name = slot.name;
                    eprintln!(
                        "hoptrace campaign: {name} run {run} ended ({}): restarting",
                        status_text(st)
                    );
                    self.log(Event::Exit {
                        at_ns: realtime_now_ns(),
                        component: name.into(),
                        run,
                        status: status_text(st),
                        expected: false,
                    })?;
                }
            } else if slot.start_at.is_some_and(|t| Instant::now() >= t) {
                self.start(i)?;
            }
        }
        Ok(())
    }

    fn pid_of(&self, name: &str) -> Option<u32> {
        self.slots
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.child.as_ref().map(|(c, _)| c.id()))
    }

    fn heartbeat(&self, start_ns: i64) -> Result<()> {
        let now = realtime_now_ns();
        let comps: Vec<serde_json::Value> = self
            .slots
            .iter()
            .map(|s| {
                serde_json::json!({
                    "component": s.name,
                    "state": if s.child.is_some() { "running" } else { "restarting" },
                    "pid": s.child.as_ref().map(|(c, _)| c.id()),
                    "run": s.child.as_ref().map(|(_, r)| *r),
                    "runs": s.next_run,
                })
            })
            .collect();
        let hb = serde_json::json!({
            "time_ns": now,
            "elapsed_s": (now - start_ns) as f64 / 1e9,
            "remaining_s": (self.end_ns - now).max(0) as f64 / 1e9,
            "supervisor_pid": std::process::id(),
            "components": comps,
        });
        let path = self.dir.join(dirs::HEARTBEAT);
        let tmp = self.dir.join(format!("{}.tmp", dirs::HEARTBEAT));
        std::fs::write(&tmp, serde_json::to_vec_pretty(&hb)?)
            .and_then(|_| std::fs::rename(&tmp, &path))
            .with_context(|| format!("writing {}", path.display()))
    }

    /// Stop every component: the publisher first, the rest 0.5 s later
    /// (the last samples on their way are received).
    fn stop_all(&mut self) -> Result<()> {
        if let Some(p) = self.slots.iter().position(|s| s.name == "publisher") {
            self.stop_one(p)?;
            std::thread::sleep(Duration::from_millis(500));
        }
        for i in 0..self.slots.len() {
            self.stop_one(i)?;
        }
        Ok(())
    }

    fn stop_one(&mut self, i: usize) -> Result<()> {
        let Some((mut child, run)) = self.slots[i].child.take() else {
            return Ok(());
        };
        signal(child.id(), libc::SIGINT);
        let deadline = Instant::now() + STOP_GRACE;
        let status = loop {
            if let Some(st) = child.try_wait()? {
                break st;
            }
            if Instant::now() >= deadline {
                signal(child.id(), libc::SIGKILL);
                break child.wait()?;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let name = self.slots[i].name;
        self.log(Event::Exit {
            at_ns: realtime_now_ns(),
            component: name.into(),
            run,
            status: status_text(status),
            expected: true,
        })
    }

    /// `hoptrace doctor --json` into `DIR/doctor/LABEL.json`, waited for.
    fn doctor(&mut self, label: &str) -> Result<()> {
        let file = format!("{}/{label}.json", dirs::DOCTOR);
        let out = std::fs::File::create(self.dir.join(&file))?;
        let st = std::process::Command::new(&self.exe)
            .args(["doctor", "--json"])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(Stdio::null())
            .status()
            .context("running hoptrace doctor")?;
        self.log(Event::Doctor {
            at_ns: realtime_now_ns(),
            label: label.into(),
            file,
            status: status_text(st),
        })
    }
}

/// Whether a component of the plan runs in a named network namespace.
fn uses_netns(plan: &Plan) -> bool {
    let sv = plan.sv.as_ref();
    [
        sv.and_then(|s| s.publisher.netns.as_ref()),
        sv.and_then(|s| s.subscriber.netns.as_ref()),
        plan.trace.as_ref().and_then(|t| t.netns.as_ref()),
        plan.stress.as_ref().and_then(|t| t.netns.as_ref()),
        plan.cyclictest.as_ref().and_then(|t| t.netns.as_ref()),
    ]
    .iter()
    .any(Option::is_some)
}

/// Programs a plan needs on PATH.
fn check_tools(plan: &Plan) -> Result<()> {
    for (needed, tool, package) in [
        (plan.stress.is_some(), "stress-ng", "stress-ng"),
        (plan.cyclictest.is_some(), "cyclictest", "rt-tests"),
        (
            uses_netns(plan) || plan.fault.iter().any(|f| f.link_down.is_some()),
            "ip",
            "iproute2",
        ),
    ] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
            .unwrap_or(false);
        if needed && !found {
            bail!(crate::exit::UsageError(format!(
                "the plan runs {tool}, which is not on PATH: install the {package} package (scripts/setup.sh does)"
            )));
        }
    }
    Ok(())
}

/// The plan and the journal state to start from: a new campaign (the plan
/// copied into DIR, `campaign_start` journaled) or a resumed one.
fn open_dir(a: &RunArgs, plan: &Plan) -> Result<(Journal, JournalState, bool)> {
    if a.resume {
        let kept = report::read_plan(&a.out)?;
        if &kept != plan {
            bail!(crate::exit::UsageError(format!(
                "{} differs from the plan {} was started with ({}): resume with that plan, or start a new campaign",
                a.plan.display(),
                a.out.display(),
                a.out.join(dirs::PLAN).display()
            )));
        }
        let state = replay(&a.out)?;
        if let Some((_, _, true)) = state.stop {
            bail!(crate::exit::UsageError(format!(
                "the campaign in {} is finished: `hoptrace campaign report {}` reports it",
                a.out.display(),
                a.out.display()
            )));
        }
        return Ok((Journal::open(&a.out)?, state, true));
    }
    crate::outputs::claim("campaign run", &a.out, &[a.plan.as_path()], a.force)?;
    for d in [
        dirs::PUBLISHER,
        dirs::TRACER,
        dirs::CYCLICTEST,
        dirs::STRESS,
        dirs::LOGS,
        dirs::DOCTOR,
    ] {
        std::fs::create_dir_all(a.out.join(d))
            .with_context(|| format!("creating {}", a.out.join(d).display()))?;
    }
    std::fs::write(a.out.join(dirs::PLAN), plan.to_toml())?;
    let mut j = Journal::open(&a.out)?;
    let start = Event::CampaignStart {
        at_ns: realtime_now_ns(),
        duration_ns: plan.campaign.duration.as_nanos().min(i64::MAX as u128) as i64,
    };
    j.append(&start)?;
    let mut state = JournalState::default();
    state.apply(&start);
    Ok((j, state, false))
}

/// The last sign of life of a supervisor that is gone: its heartbeat's
/// time, else its journal's last event.
fn last_seen(dir: &Path, state: &JournalState) -> i64 {
    std::fs::read_to_string(dir.join(dirs::HEARTBEAT))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("time_ns")?.as_i64())
        .unwrap_or(0)
        .max(state.last_ns)
}

pub fn run(a: RunArgs) -> Result<ExitCode> {
    let text = std::fs::read_to_string(&a.plan)
        .with_context(|| format!("reading the plan {}", a.plan.display()))?;
    let plan =
        Plan::parse(&text).map_err(|e| crate::exit::usage(format!("{}: {e}", a.plan.display())))?;
    check_tools(&plan)?;
    let (journal, state, resumed) = open_dir(&a, &plan)?;
    let stop = hoptrace_os::stop_flag()?;
    let now = Instant::now();
    let now_ns = realtime_now_ns();
    let mut sv = Supervisor {
        slots: plan
            .components()
            .into_iter()
            .map(|name| Slot {
                name,
                child: None,
                next_run: state.components.get(name).map(|h| h.runs).unwrap_or(0),
                // The subscriber listens before the publisher sends.
                start_at: Some(
                    now + if name == "publisher" {
                        Duration::from_secs(1)
                    } else {
                        Duration::ZERO
                    },
                ),
            })
            .collect(),
        plan,
        dir: a.out.clone(),
        exe: std::env::current_exe().context("finding the hoptrace binary")?,
        journal,
        end_ns: state.end_ns(),
        links: LinkFaults::default(),
    };
    if resumed {
        let seen = last_seen(&a.out, &state);
        eprintln!(
            "hoptrace campaign: resuming {} (supervisor gone since {:.1} s)",
            a.out.display(),
            (now_ns - seen) as f64 / 1e9
        );
        sv.log(Event::Resume {
            at_ns: now_ns,
            last_seen_ns: seen,
        })?;
        LinkFaults::resume(&mut sv.journal, &sv.plan, &state)?;
    }
    sv.doctor(if resumed { "resume" } else { "start" })?;
    let supervised = supervise(&mut sv, &state, &stop);
    // No link stays down after the supervisor, whatever ended it.
    sv.links.up_all(&mut sv.journal, &sv.plan)?;
    let complete = supervised?;
    sv.stop_all()?;
    sv.doctor(&format!(
        "end-{}",
        if resumed { state.resumes.len() + 1 } else { 0 }
    ))?;
    sv.log(Event::Stop {
        at_ns: realtime_now_ns(),
        reason: if complete {
            "duration reached".into()
        } else {
            "signal".into()
        },
        complete,
    })?;
    sv.heartbeat(state.start_ns)?;
    super::print_report(&a.out, &report::Options::default(), None, None)
}

/// The loop, until the end or a signal: whether the end was reached.
fn supervise(
    sv: &mut Supervisor,
    state: &JournalState,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<bool> {
    let start_ns = state.start_ns;
    let mut faults: Vec<(i64, FaultAction)> = sv
        .plan
        .fault
        .iter()
        .filter_map(|f| Some((start_ns + f.at.as_nanos() as i64, f.action()?)))
        .filter(|(t, _)| *t > realtime_now_ns())
        .collect();
    let mut next_beat = Instant::now();
    let every = sv.plan.campaign.doctor_every;
    let mut next_doctor = Instant::now() + every;
    let mut doctors = 0;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        if realtime_now_ns() >= sv.end_ns {
            return Ok(true);
        }
        sv.watch()?;
        let now_ns = realtime_now_ns();
        while let Some(pos) = faults.iter().position(|(t, _)| *t <= now_ns) {
            match faults.remove(pos).1 {
                FaultAction::Kill(name) => {
                    if let Some(pid) = sv.pid_of(&name) {
                        eprintln!("hoptrace campaign: fault: SIGKILL to {name} (pid {pid})");
                        sv.log(Event::Fault {
                            at_ns: now_ns,
                            component: name,
                            action: "kill".into(),
                            pid,
                        })?;
                        signal(pid, libc::SIGKILL);
                    }
                }
                FaultAction::LinkDown(name, down_for) => {
                    let up_at = now_ns + down_for.as_nanos() as i64;
                    sv.links.down(&mut sv.journal, &sv.plan, &name, up_at)?;
                }
            }
        }
        sv.links.due(&mut sv.journal, &sv.plan)?;
        if Instant::now() >= next_beat {
            sv.heartbeat(start_ns)?;
            next_beat += sv.plan.campaign.heartbeat;
        }
        if Instant::now() >= next_doctor {
            doctors += 1;
            sv.doctor(&format!("hour-{doctors:03}"))?;
            next_doctor += every;
        }
        std::thread::sleep(TICK);
    }
}
