//! Flags several commands share, and how a command's config file meets
//! its flags.
//!
//! # A setting comes from its flag, else the config file, else its default
//!
//! `sv publish`, `sv subscribe`, `ping` and `reflect` take `--config FILE`
//! ([`ConfigArgs`]): a TOML file with one table per command (`[publish]`,
//! `[subscribe]`, `[ping]`, `[reflect]`; a key is the long flag with `_`,
//! see `hoptrace_endpoints::config`). The defaults are clap's
//! (`default_value`), so `--help` shows them, and parsing leaves them in
//! the command's arguments. Whether a flag was on the command line is
//! clap's to say too ([`clap::ArgMatches::value_source`]): [`GivenFlags`]
//! keeps the answer for the command that runs. After parsing,
//! [`with_config_file`] reads the file and calls the command's
//! [`FromConfigFile::overlay`] once, which sets every setting whose flag
//! was not given from its key in the command's table. `run()` reads the
//! arguments as resolved: it never asks where a value came from.
//!
//! A setting without a default (an `Option` that stays `None`, e.g.
//! `--record`) takes the file's key the same way; one whose default is
//! computed at run time says it in its help (`[default: 50]`).
//!
//! # A flag that needs another says so to clap
//!
//! A flag that only does something with another is declared with
//! `requires`, so a command line on which it would do nothing is refused
//! with a message naming what to add. Where the other flag takes part in a
//! conflict (`--svid` conflicts with `--streams`), `requires` names a group
//! holding that flag rather than the flag itself: clap excuses a missing
//! *argument* when it conflicts with one that was given (so `--appid 0x4123
//! --streams 1` would pass, `--appid` doing nothing), but never a missing
//! group. Such a group of one flag is `with_<flag>` ([`WITH_SVID`],
//! [`WITH_SCL`]). Where the config file can stand in for the other flag
//! (`--loop` needs `--replay`, which `replay = "..."` in the file gives
//! too), the group also holds `--config` (`replay_from_flag_or_file`), and
//! `run()` checks that the file did give it. A flag that does nothing when
//! another is given conflicts with it (`--svid-prefix` with `--svid`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::parser::ValueSource;
use hoptrace_endpoints::config::{self, ConfigFile};
use hoptrace_units::CpuList;

/// The group that holds `--svid` alone, for the flags that need it.
pub const WITH_SVID: &str = "with_svid";
/// The group that holds `--scl` alone, for the flags that need it.
pub const WITH_SCL: &str = "with_scl";

/// `--cpu LIST --fifo PRIO`: the real-time settings of the thread that
/// sends or receives (`sv publish`, `sv subscribe`, `ping`, `reflect`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RealtimeArgs {
    /// Pin the thread that sends or receives to this CPU, e.g. an isolated
    /// one (`3`), or to a CPU list the scheduler chooses from (`2-3`).
    #[arg(long, value_name = "LIST", value_parser = hoptrace_units::arg::cpu_list)]
    pub cpu: Option<CpuList>,
    /// Run the thread that sends or receives SCHED_FIFO at this priority
    /// (1 to 99; needs root or CAP_SYS_NICE).
    #[arg(long, value_name = "PRIO")]
    pub fifo: Option<i32>,
}

impl RealtimeArgs {
    /// The settings of a config table (`cpu`, `fifo`) where no flag gave them.
    pub fn overlay(&mut self, cpu: Option<CpuList>, fifo: Option<i32>) {
        self.cpu = self.cpu.take().or(cpu);
        self.fifo = self.fifo.or(fifo);
    }

    /// Pin the calling thread and make it SCHED_FIFO, as asked; say so on
    /// stderr.
    pub fn apply(&self) -> Result<()> {
        hoptrace_endpoints::sched::apply(self.cpu.as_ref(), self.fifo)
    }
}

/// `--busy-poll` and `--xdp` of the receiving endpoints (`ping`,
/// `reflect`, `sv subscribe`): how frames reach the endpoint and how it
/// waits for them (`hoptrace_endpoints::busy_poll`, `hoptrace_endpoints::xsk`).
#[derive(clap::Args, Debug, Default, Clone)]
pub struct WakeArgs {
    /// Never sleep waiting for frames: SO_BUSY_POLL of USECS on the socket
    /// [default when given without a value: 50] and a reader that spins on
    /// non-blocking receives. Uses a whole CPU: give it one with --cpu
    /// (ideally isolated) and --fifo.
    #[arg(long, value_name = "USECS", num_args = 0..=1,
          default_missing_value = "50")]
    pub busy_poll: Option<u32>,
    /// Receive (and for ping/reflect send) through an AF_XDP socket fed by
    /// an XDP program on the interface (copy mode where the driver has no
    /// zero-copy; detached when the process exits). Stamps are then taken
    /// in user space (CLOCK_REALTIME, source `application`). Needs root.
    #[arg(long)]
    pub xdp: bool,
}

impl WakeArgs {
    /// The `busy_poll` and `xdp` keys of a config table where no flag gave
    /// them.
    pub fn overlay(&mut self, given: &GivenFlags, busy_poll: Option<u32>, xdp: Option<bool>) {
        given.overlay_option("busy_poll", &mut self.busy_poll, busy_poll);
        given.overlay("xdp", &mut self.xdp, xdp);
    }
}

/// `--config FILE` of the commands with a table of their own.
#[derive(clap::Args, Debug, Default)]
pub struct ConfigArgs {
    /// TOML configuration file: the command's table (`[publish]`,
    /// `[subscribe]`, `[ping]` or `[reflect]`; keys are the long flags
    /// with `_`) and, for `sv publish|subscribe`, the streams (`[scl]`,
    /// `[[stream]]`). A flag given overrides its key; a key overrides the
    /// default shown here.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The file as read, once [`with_config_file`] has.
    #[arg(skip)]
    pub file: Option<ConfigFile>,
}

impl ConfigArgs {
    /// The file's path and contents, when there is one.
    pub fn loaded(&self) -> Option<(&Path, &ConfigFile)> {
        self.config.as_deref().zip(self.file.as_ref())
    }
}

/// The flags on the command line of the command that runs, by clap id
/// (the field's name: `wake_margin` for `--wake-margin`).
#[derive(Debug, Default, Clone)]
pub struct GivenFlags(BTreeSet<String>);

impl GivenFlags {
    /// The flags given to the innermost subcommand of `matches` (`publish`
    /// of `hoptrace sv publish`): on the command line, or from an
    /// environment variable, not defaults.
    pub fn of(matches: &clap::ArgMatches) -> GivenFlags {
        let mut m = matches;
        while let Some((_, sub)) = m.subcommand() {
            m = sub;
        }
        GivenFlags(
            m.ids()
                .map(|id| id.as_str())
                .filter(|id| {
                    matches!(
                        m.value_source(id),
                        Some(ValueSource::CommandLine | ValueSource::EnvVariable)
                    )
                })
                .map(str::to_string)
                .collect(),
        )
    }

    /// Whether the flag with clap id `id` was given.
    pub fn contains(&self, id: &str) -> bool {
        self.0.contains(id)
    }

    /// A setting with a default: `from_file` replaces it unless its flag
    /// (clap id `id`) was given.
    pub fn overlay<T>(&self, id: &str, setting: &mut T, from_file: Option<T>) {
        if let (false, Some(v)) = (self.contains(id), from_file) {
            *setting = v;
        }
    }

    /// A setting without a default: `from_file` unless the flag was given.
    pub fn overlay_option<T>(&self, id: &str, setting: &mut Option<T>, from_file: Option<T>) {
        self.overlay(id, setting, from_file.map(Some));
    }
}

/// A command whose settings a table of the config file can give.
pub trait FromConfigFile {
    /// The command's `--config`.
    fn config_args(&mut self) -> &mut ConfigArgs;

    /// Set every setting whose flag `given` does not list from its key in
    /// the command's table of `file`, when the table has it.
    fn overlay(&mut self, file: &ConfigFile, given: &GivenFlags);
}

/// `args` with its `--config` file read and overlaid (flags > file >
/// defaults); as parsed when there is no `--config`.
pub fn with_config_file<A: FromConfigFile>(mut args: A, given: &GivenFlags) -> Result<A> {
    let Some(path) = args.config_args().config.clone() else {
        return Ok(args);
    };
    let file = config::load(&path)?;
    args.overlay(&file, given);
    args.config_args().file = Some(file);
    Ok(args)
}

/// The `--iface` of a command that needs one, from the flag or the file.
pub fn required_iface(iface: &Option<String>) -> Result<String> {
    iface
        .clone()
        .ok_or_else(|| anyhow::anyhow!("--iface is required (or `iface` in the config file)"))
}

#[cfg(test)]
mod tests {
    //! Flag > config file > default, for every command with a table.

    use std::time::Duration;

    use crate::{parse_command_line, sv, Command};

    /// `hoptrace LINE --config FILE` with `toml` in FILE (no `--config`
    /// when `toml` is None), parsed and overlaid.
    fn configured(line: &str, toml: Option<&str>) -> Command {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hoptrace.toml");
        let mut argv: Vec<String> = std::iter::once("hoptrace")
            .chain(line.split_whitespace())
            .map(str::to_string)
            .collect();
        if let Some(text) = toml {
            std::fs::write(&path, text).unwrap();
            argv.extend(["--config".to_string(), path.display().to_string()]);
        }
        let (cmd, given) = parse_command_line(argv).unwrap_or_else(|e| panic!("{e}"));
        cmd.with_config_file(&given).unwrap()
    }

    /// `hoptrace sv publish FLAGS` with `toml`.
    fn publish(flags: &str, toml: Option<&str>) -> sv::publish::Args {
        match configured(&format!("sv publish {flags}"), toml) {
            Command::Sv(sv::Command::Publish(a)) => *a,
            other => unreachable!("{other:?}"),
        }
    }

    /// `hoptrace sv subscribe FLAGS` with `toml`.
    fn subscribe(flags: &str, toml: Option<&str>) -> sv::subscribe::Args {
        match configured(&format!("sv subscribe {flags}"), toml) {
            Command::Sv(sv::Command::Subscribe(a)) => *a,
            other => unreachable!("{other:?}"),
        }
    }

    const PUBLISH_TABLE: &str = r#"
[publish]
iface = "file0"
streams = 3
rate = 4800
asdu = 2
vlan = "100:5"
samples = 100
refrtm = true
record = "file-rec"
svid_prefix = "FILE"
wake_margin = "20us"
loop = 4
cpu = "2-3"
fifo = 10
"#;

    /// Every setting of the `[publish]` table, as flags.
    const PUBLISH_FLAGS: &str = "--iface flag0 --streams 5 --rate 4000 --asdu 1 --vlan 7 \
        --samples 9 --refrtm --record flag-rec --svid-prefix FLAG --wake-margin 0 --loop 2 \
        --cpu 1 --fifo 20";

    #[test]
    fn publish_settings_come_from_the_flag_else_the_file_else_the_default() {
        let show = |a: &sv::publish::Args| {
            format!(
                "{:?} {} {} {} {:?} {:?} {} {:?} {} {:?} {} {:?} {:?}",
                a.iface,
                a.streams,
                a.rate,
                a.asdu,
                a.vlan.map(|v| (v.vid, v.pcp)),
                a.samples,
                a.refrtm,
                a.record,
                a.svid_prefix,
                a.wake_margin,
                a.loop_count,
                a.realtime.cpu.as_ref().map(|c| c.to_string()),
                a.realtime.fifo,
            )
        };
        let none = publish("", None);
        assert_eq!(
            show(&none),
            r#"None 1 4000 1 None None false None HOPTRACE_SV None 1 None None"#
        );
        let file = publish("", Some(PUBLISH_TABLE));
        assert_eq!(
            show(&file),
            r#"Some("file0") 3 4800 2 Some((100, 5)) Some(100) true Some("file-rec") FILE Some(20µs) 4 Some("2,3") Some(10)"#
        );
        assert_eq!(
            show(&publish(PUBLISH_FLAGS, Some(PUBLISH_TABLE))),
            r#"Some("flag0") 5 4000 1 Some((7, 4)) Some(9) true Some("flag-rec") FLAG Some(0ns) 2 Some("1") Some(20)"#
        );
        // A flag given at its default value still wins over the file.
        assert_eq!(publish("--rate 4000", Some(PUBLISH_TABLE)).rate, 4000);
        assert!(file.config.loaded().is_some() && none.config.loaded().is_none());
    }

    #[test]
    fn publish_duration_or_samples_on_the_command_line_sets_aside_both_keys() {
        let a = publish("--duration 1s", Some(PUBLISH_TABLE));
        assert_eq!(
            (a.duration, a.samples),
            (Some(Duration::from_secs(1)), None)
        );
        let a = publish("", Some("[publish]\nduration = \"2s\"\n"));
        assert_eq!(
            (a.duration, a.samples),
            (Some(Duration::from_secs(2)), None)
        );
        let a = publish("--samples 7", Some("[publish]\nduration = \"2s\"\n"));
        assert_eq!((a.duration, a.samples), (None, Some(7)));
    }

    const SUBSCRIBE_TABLE: &str = r#"
[subscribe]
iface = "file1"
stream = ["A", "B"]
duration = "10s"
count = 50
record = "file-rec"
reference = "pub-rec"
rate = 4800
rx_mode = "ring"
ring_blocks = 16
metrics = "9464"
retain = "7d"
max_disk = "1GiB"
rollup_retain = "30d"
expect_streams = true
cpu = 3
fifo = 80
"#;

    /// Every setting of the `[subscribe]` table, as flags.
    const SUBSCRIBE_FLAGS: &str = "--iface flag1 --stream C --duration 1s --count 5 \
        --record flag-rec --reference other --rate 4000 --rx-mode recvmmsg --ring-blocks 8 \
        --metrics 9000 --retain 1d --max-disk 1MiB --rollup-retain 2d --expect-streams --cpu 0-1 --fifo 1";

    #[test]
    fn subscribe_settings_come_from_the_flag_else_the_file_else_the_default() {
        let show = |a: &sv::subscribe::Args| {
            format!(
                "{:?} {:?} {:?} {:?} {:?} {:?} {} {} {:?} {:?} {:?} {:?} {:?} {} {:?} {:?}",
                a.iface,
                a.stream,
                a.duration,
                a.count,
                a.record,
                a.reference,
                a.rate,
                a.rx_mode,
                a.ring_blocks,
                a.metrics,
                a.retention.retain,
                a.retention.max_disk,
                a.retention.rollup_retain,
                a.expect_streams,
                a.realtime.cpu.as_ref().map(|c| c.to_string()),
                a.realtime.fifo,
            )
        };
        assert_eq!(
            show(&subscribe("", None)),
            "None [] None None None None 4000 recvmmsg None None None None None false None None"
        );
        assert_eq!(
            show(&subscribe("", Some(SUBSCRIBE_TABLE))),
            r#"Some("file1") ["A", "B"] Some(10s) Some(50) Some("file-rec") Some("pub-rec") 4800 ring Some(16) Some("9464") Some(604800s) Some(1073741824) Some(2592000s) true Some("3") Some(80)"#
        );
        assert_eq!(
            show(&subscribe(SUBSCRIBE_FLAGS, Some(SUBSCRIBE_TABLE))),
            r#"Some("flag1") ["C"] Some(1s) Some(5) Some("flag-rec") Some("other") 4000 recvmmsg Some(8) Some("9000") Some(86400s) Some(1048576) Some(172800s) true Some("0,1") Some(1)"#
        );
    }

    const THRESHOLD_TABLE: &str = r#"
[subscribe]
record = "rec"
explain = "1ms"
threshold = "2ms"
on_threshold = ["pcap:3", "stop"]
on_threshold_max = 7
on_threshold_max_bytes = "1MiB"
exceedance_dir = "ex"
"#;

    /// The error of `a`'s threshold settings.
    fn threshold_error(a: &sv::subscribe::Args) -> String {
        match a.threshold.subscriber(None, a.explain, String::new()) {
            Err(e) => e.to_string(),
            Ok(s) => panic!("no error, settings: {:?}", s.map(|s| s.ctx)),
        }
    }

    #[test]
    fn a_services_config_file_gives_the_threshold_and_its_actions_and_flags_still_win() {
        use crate::on_threshold::action::Action;
        let a = subscribe("", Some(THRESHOLD_TABLE));
        let t = &a.threshold;
        assert_eq!((a.explain, t.threshold), (Some(1_000_000), Some(2_000_000)));
        assert_eq!(t.on_threshold_from_file, ["pcap:3", "stop"]);
        assert_eq!((t.on_threshold_max, t.on_threshold_max_bytes), (7, 1 << 20));
        let s = t
            .subscriber(a.record.as_deref(), a.explain, String::new())
            .unwrap()
            .expect("the file's threshold");
        assert_eq!((s.ctx.threshold_ns, s.ctx.window), (2_000_000, 3));
        assert!(s.plan.stop, "the file's `stop`");
        assert_eq!(s.dir.as_deref(), Some(std::path::Path::new("ex")));
        assert!(s.ctx.explained_in.is_some(), "explained at 1 ms < 2 ms");

        let b = subscribe(
            "--explain 5ms --threshold 3ms --on-threshold pcap:1 --on-threshold-max 2",
            Some(THRESHOLD_TABLE),
        );
        let t = &b.threshold;
        assert_eq!((b.explain, t.threshold), (Some(5_000_000), Some(3_000_000)));
        assert_eq!(t.on_threshold, [Action::Pcap { frames: 1 }]);
        assert!(
            t.on_threshold_from_file.is_empty(),
            "the flag sets the key aside"
        );
        assert_eq!((t.on_threshold_max, t.on_threshold_max_bytes), (2, 1 << 20));
        let s = t
            .subscriber(None, b.explain, String::new())
            .unwrap()
            .unwrap();
        assert_eq!((s.ctx.window, s.plan.stop), (1, false));
        assert!(s.ctx.explained_in.is_none(), "explained only over 5 ms");

        // A bad action in the file is named with its key.
        let c = subscribe(
            "",
            Some("[subscribe]\nthreshold = \"2ms\"\non_threshold = [\"pcapp:3\"]\n"),
        );
        let e = threshold_error(&c);
        assert!(e.contains("on_threshold `pcapp:3`"), "{e}");
        // Actions with no threshold from the flag or the file are refused,
        // not ignored.
        let d = subscribe("", Some("[subscribe]\non_threshold = [\"stop\"]\n"));
        assert!(threshold_error(&d).contains("give --threshold"));
        let e = subscribe("--on-threshold stop", Some("[subscribe]\niface = \"x\"\n"));
        assert!(threshold_error(&e).contains("give --threshold"));
        // Without a config file, clap refuses the flag alone.
        let argv = ["hoptrace", "sv", "subscribe", "--on-threshold", "stop"];
        let err = parse_command_line(argv).expect_err("refused").to_string();
        assert!(err.contains("--threshold"), "{err}");
    }

    #[test]
    fn ping_and_reflect_settings_come_from_the_flag_else_the_file_else_the_default() {
        let table = "[ping]\ninterval = \"250us\"\ncount = 5\nsize = \"1.5kB\"\n\
                     max_latency = \"1ms\"\nbreak = true\nlinger = \"2s\"\ncpu = 1\n\
                     [reflect]\ndelay = \"20ms\"\nfifo = 50\n";
        let ping = |line: &str, toml| match configured(&format!("ping {line}"), toml) {
            Command::Ping(a) => format!(
                "{:?} {} {} {:?} {} {:?} {:?}",
                a.interval,
                a.count,
                a.size,
                a.max_latency,
                a.break_on_max,
                a.linger,
                a.realtime.cpu.map(|c| c.to_string())
            ),
            other => unreachable!("{other:?}"),
        };
        assert_eq!(ping("", None), "1ms 1000 64 None false 500ms None");
        assert_eq!(
            ping("", Some(table)),
            "250µs 5 1500 Some(1ms) true 2s Some(\"1\")"
        );
        assert_eq!(
            ping("--interval 2ms --count 7 --cpu 0", Some(table)),
            "2ms 7 1500 Some(1ms) true 2s Some(\"0\")"
        );
        let reflect = |line: &str, toml| match configured(&format!("reflect {line}"), toml) {
            Command::Reflect(a) => (a.delay, a.realtime.fifo),
            other => unreachable!("{other:?}"),
        };
        assert_eq!(reflect("", None), (Duration::ZERO, None));
        assert_eq!(
            reflect("", Some(table)),
            (Duration::from_millis(20), Some(50))
        );
        assert_eq!(
            reflect("--delay 0 --fifo 2", Some(table)),
            (Duration::ZERO, Some(2))
        );
    }

    #[test]
    fn a_bad_config_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "[publish]\ncpu = \"2-N\"\n").unwrap();
        let argv = [
            "hoptrace",
            "sv",
            "publish",
            "--config",
            path.to_str().unwrap(),
        ];
        let (cmd, given) = parse_command_line(argv).unwrap();
        let e = format!("{:#}", cmd.with_config_file(&given).unwrap_err());
        assert!(
            e.contains("bad.toml") && e.contains("`N` (the last CPU)"),
            "{e}"
        );
    }
}
