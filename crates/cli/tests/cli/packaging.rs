//! The Debian package and the RPM (`scripts/package.sh`, docs/packaging.md).
//!
//! The packages are built once per test process from the binary under test
//! (`target/release/hoptrace`, which `scripts/test.sh` has just built: the
//! script is told not to build, so no second profile is compiled). What
//! they must contain is derived independently of the generator: the command
//! tree from the binary's own `--help` (every `Commands:` entry at every
//! depth, so a new subcommand without a page fails), the units from
//! `deploy/systemd/`, the docs from `docs/`. The .deb's list must be exactly
//! that set; the RPM's list, with the paths where Fedora and Debian differ
//! mapped (systemd unit directory, zsh completion directory, licence file),
//! must be the same set. lintian's tags must each be explained in
//! docs/packaging.md. Installing the .deb (root) is in [`privileged`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

const BIN: &str = env!("CARGO_BIN_EXE_hoptrace");
const VERSION: &str = env!("CARGO_PKG_VERSION");

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// `scripts/package.sh KIND` (deb or rpm) on the binary under test, once
/// per process: the package copied to a folder of this process's own.
///
/// The script rewrites target/release/packaging and the package files in
/// place, and the tests of two processes (scripts/test.sh runs the
/// privileged ones while the others run) can package at the same time: a
/// lock on `target/release/packaging.lock` (flock, so it is released when
/// a process dies) makes one wait for the other, and each reads only its
/// copy, which no other process writes.
fn package(kind: &str, built: &'static OnceLock<PathBuf>, file: String) -> &'static Path {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    built.get_or_init(|| {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let packaged = root().join("target/release/hoptrace");
        assert_eq!(
            Path::new(BIN).canonicalize().unwrap(),
            packaged.canonicalize().unwrap(),
            "the packages hold target/release/hoptrace: run these tests with --release"
        );
        let _lock = PackagingLock::take();
        let out = Command::new(root().join("scripts/package.sh"))
            .arg(kind)
            .env("HOPTRACE_PACKAGE_NO_BUILD", "1")
            .current_dir(root())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "scripts/package.sh {kind}:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let made = root().join(&file);
        let copy = own_copies().join(made.file_name().unwrap());
        std::fs::copy(&made, &copy).unwrap_or_else(|e| panic!("copying {made:?}: {e}"));
        copy
    })
}

/// `target/release/packaging.lock`, held (flock) from packaging to copying.
struct PackagingLock {
    _held: std::fs::File,
}

impl PackagingLock {
    fn take() -> PackagingLock {
        use std::os::fd::AsRawFd;
        let path = root().join("target/release/packaging.lock");
        let f = std::fs::File::create(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        // SAFETY: flock(2) on a file this value owns; it waits, and the
        // kernel releases it when the file is closed (on drop, or when the
        // process dies).
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(r, 0, "flock {path:?}: {}", std::io::Error::last_os_error());
        PackagingLock { _held: f }
    }
}

/// `target/release/packaging-copies/PID/`, made once; the folders of
/// processes that are gone are removed first.
fn own_copies() -> PathBuf {
    let all = root().join("target/release/packaging-copies");
    for e in std::fs::read_dir(&all).into_iter().flatten().flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        if !Path::new("/proc").join(&pid).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    let own = all.join(std::process::id().to_string());
    std::fs::create_dir_all(&own).unwrap_or_else(|e| panic!("{own:?}: {e}"));
    own
}

/// The .deb, built once per process.
pub(crate) fn deb_package() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    package(
        "deb",
        &BUILT,
        format!("target/debian/hoptrace_{VERSION}-1_amd64.deb"),
    )
}

/// The RPM, built once per process.
fn rpm_package() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    package(
        "rpm",
        &BUILT,
        format!("target/generate-rpm/hoptrace-{VERSION}-1.x86_64.rpm"),
    )
}

pub(crate) fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every command at every depth (`hoptrace`, `hoptrace sv`, `hoptrace sv
/// publish`, ...), read from the `Commands:` lists of the binary's `--help`.
fn command_paths() -> Vec<String> {
    fn walk(path: &str, out: &mut Vec<String>) {
        out.push(path.to_string());
        let words: Vec<&str> = path.split(' ').skip(1).collect();
        let help = stdout_of(Command::new(BIN).args(&words).arg("--help"));
        let mut lines = help.lines().skip_while(|l| *l != "Commands:").skip(1);
        // entries are indented two spaces; their wrapped text further
        let names: Vec<String> = lines
            .by_ref()
            .take_while(|l| l.starts_with("  "))
            .filter(|l| !l.starts_with("   "))
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .filter(|n| n != "help")
            .collect();
        for name in names {
            walk(&format!("{path} {name}"), out);
        }
    }
    let mut out = Vec::new();
    walk("hoptrace", &mut out);
    out
}

fn names_in(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The files the .deb must hold, derived from the tree and the binary.
fn expected_deb_files() -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    files.insert("/usr/bin/hoptrace".to_string());
    for unit in names_in("deploy/systemd") {
        files.insert(format!("/lib/systemd/system/{unit}"));
    }
    for path in command_paths() {
        files.insert(format!(
            "/usr/share/man/man1/{}.1.gz",
            path.replace(' ', "-")
        ));
    }
    files.insert("/usr/share/bash-completion/completions/hoptrace".into());
    files.insert("/usr/share/zsh/vendor-completions/_hoptrace".into());
    files.insert("/usr/share/fish/vendor_completions.d/hoptrace.fish".into());
    let doc = "/usr/share/doc/hoptrace";
    for d in names_in("docs") {
        if d.ends_with(".md") || d == "report.schema.json" {
            files.insert(format!("{doc}/{d}"));
        }
    }
    for d in ["README.md", "copyright", "third-party-licenses.tsv"] {
        files.insert(format!("{doc}/{d}"));
    }
    files.insert("/usr/share/hoptrace/grafana/hoptrace.json".into());
    files
}

/// The regular files of the .deb (`dpkg-deb -c`), as absolute paths.
fn deb_files(deb: &Path) -> BTreeSet<String> {
    stdout_of(Command::new("dpkg-deb").arg("-c").arg(deb))
        .lines()
        .filter(|l| l.starts_with('-'))
        .map(|l| {
            l.split_whitespace()
                .last()
                .unwrap()
                .trim_start_matches('.')
                .to_string()
        })
        .collect()
}

#[test]
fn the_deb_holds_the_binary_every_unit_a_man_page_per_command_completions_and_docs() {
    let deb = deb_package();
    let got = deb_files(deb);
    let want = expected_deb_files();
    let missing: Vec<_> = want.difference(&got).collect();
    let extra: Vec<_> = got.difference(&want).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{}: missing {missing:?}, not expected {extra:?}",
        deb.display()
    );
    assert!(got.contains("/usr/share/man/man1/hoptrace-trace.1.gz"));
    assert!(got.contains("/usr/share/man/man1/hoptrace-sv-publish.1.gz"));
}

#[test]
fn the_deb_depends_on_what_the_binary_links_and_has_the_workspace_version() {
    let deb = deb_package();
    let field = |f: &str| stdout_of(Command::new("dpkg-deb").args(["-f"]).arg(deb).arg(f));
    assert_eq!(field("Version").trim(), format!("{VERSION}-1"));
    // dpkg-shlibdeps on the binary: the C library and whatever else the
    // binary links dynamically (libelf and zlib are linked in: see
    // portable_binary), nothing it does not link.
    let needed = crate::portable_binary::needed_libraries();
    let depends = field("Depends");
    let deps: Vec<&str> = depends
        .trim()
        .split(", ")
        .map(|d| d.split_whitespace().next().unwrap())
        .collect();
    assert!(deps.contains(&"libc6"), "{depends}");
    for (lib, package) in [("libelf.so.1", "libelf1"), ("libz.so.1", "zlib1g")] {
        assert_eq!(
            needed.contains(lib),
            deps.contains(&package),
            "{lib} vs {depends}"
        );
    }
    assert!(deps.len() <= needed.len(), "{depends} for {needed:?}");
}

#[test]
fn the_rpm_lists_the_same_files_as_the_deb() {
    let rpm_file = rpm_package();
    let rpm: BTreeSet<String> = stdout_of(Command::new("rpm").arg("-qpl").arg(rpm_file))
        .lines()
        .map(|l| {
            l.replace("/usr/lib/systemd/system/", "/lib/systemd/system/")
                .replace(
                    "/usr/share/zsh/site-functions/",
                    "/usr/share/zsh/vendor-completions/",
                )
                .replace(
                    "/usr/share/licenses/hoptrace/LICENSE",
                    "/usr/share/doc/hoptrace/copyright",
                )
        })
        .collect();
    let deb = deb_files(deb_package());
    assert_eq!(rpm, deb);
    let info = stdout_of(Command::new("rpm").arg("-qpi").arg(rpm_file));
    assert!(
        info.contains("Apache-2.0") && info.contains(VERSION),
        "{info}"
    );
}

/// The tags of a lintian report (`W: hoptrace: TAG details`).
fn lintian_tags(report: &str) -> BTreeSet<String> {
    report
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ": ");
            let (kind, _, rest) = (parts.next()?, parts.next()?, parts.next()?);
            ["E", "W", "I"]
                .contains(&kind)
                .then(|| rest.split_whitespace().next().unwrap().to_string())
        })
        .collect()
}

#[test]
fn every_tag_lintian_gives_the_deb_is_explained_in_docs_packaging() {
    let out = Command::new("lintian")
        .args(["--tag-display-limit", "0", "--info"])
        .arg(deb_package())
        .output()
        .expect("lintian (scripts/setup.sh installs it)");
    let report = String::from_utf8_lossy(&out.stdout);
    let doc = std::fs::read_to_string(root().join("docs/packaging.md")).unwrap();
    let unexplained: Vec<String> = lintian_tags(&report)
        .into_iter()
        .filter(|t| !doc.contains(&format!("`{t}`")))
        .collect();
    assert!(
        unexplained.is_empty(),
        "not in docs/packaging.md: {unexplained:?}\n{report}"
    );
}

#[test]
fn the_licence_check_refuses_a_crate_outside_the_allow_list() {
    // the check itself passes on the tree (scripts/package.sh runs it);
    // here, that it can fail: a copyleft crate in a made-up graph
    let dir = tempfile::tempdir().unwrap();
    let pkg = |name: &str, license: &str, source: Option<&str>| {
        serde_json::json!({"id": name, "name": name, "version": "1.0.0",
            "license": license, "source": source, "repository": null})
    };
    let dep = |name: &str, kind: Option<&str>| serde_json::json!({"pkg": name, "dep_kinds": [{"kind": kind}]});
    let reg = Some("registry+https://github.com/rust-lang/crates.io-index");
    let metadata = serde_json::json!({
        "packages": [pkg("hoptrace", "Apache-2.0", None), pkg("permissive", "MIT OR Apache-2.0", reg),
                     pkg("copyleft", "GPL-3.0-only", reg), pkg("testonly", "GPL-3.0-only", reg)],
        "resolve": {"nodes": [
            {"id": "hoptrace", "deps": [dep("permissive", None), dep("testonly", Some("dev"))]},
            {"id": "permissive", "deps": [dep("copyleft", None)]},
            {"id": "copyleft", "deps": []}, {"id": "testonly", "deps": []}]}
    });
    let file = dir.path().join("metadata.json");
    std::fs::write(&file, metadata.to_string()).unwrap();
    let out = Command::new("python3")
        .arg(root().join("scripts/third_party_licenses.py"))
        .arg("--metadata")
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("copyleft 1.0.0: GPL-3.0-only"), "{err}");
    assert!(
        !err.contains("testonly"),
        "a dev-dependency is not linked: {err}"
    );
}

/// Installing the .deb on this host (root): tests that change the system.
mod privileged {
    use super::*;

    /// Purges the package when dropped (the test failed half-way, too).
    struct Installed;
    impl Drop for Installed {
        fn drop(&mut self) {
            let _ = Command::new("dpkg").args(["--purge", "hoptrace"]).output();
        }
    }

    fn installed() -> bool {
        Command::new("dpkg-query")
            .args(["-W", "-f=${Status}", "hoptrace"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
            .unwrap_or(false)
    }

    #[test]
    fn the_deb_installs_finds_its_pages_runs_verifies_its_units_and_purges_without_a_trace() {
        if !hoptrace_netns::require_privileges(
            "the_deb_installs_finds_its_pages_runs_verifies_its_units_and_purges_without_a_trace",
        ) {
            return;
        }
        assert!(
            !installed(),
            "a hoptrace package is installed on this host: not replacing it"
        );
        let deb = deb_package();
        let files = deb_files(deb);
        let present: Vec<&String> = files.iter().filter(|f| Path::new(f).exists()).collect();
        assert!(
            present.is_empty(),
            "files of the package already on this host: {present:?}"
        );

        let guard = Installed;
        stdout_of(Command::new("dpkg").arg("-i").arg(deb));
        assert!(installed());
        let page = stdout_of(Command::new("man").args(["-w", "hoptrace-trace"]));
        assert_eq!(page.trim(), "/usr/share/man/man1/hoptrace-trace.1.gz");
        let version = stdout_of(Command::new("/usr/bin/hoptrace").arg("--version"));
        assert!(
            version.starts_with(&format!("hoptrace {VERSION}\n")),
            "{version}"
        );
        assert!(version.contains("tp_btf"), "{version}");
        verify_installed_units();

        stdout_of(Command::new("dpkg").args(["-r", "hoptrace"]));
        let left: Vec<&String> = files.iter().filter(|f| Path::new(f).exists()).collect();
        assert!(left.is_empty(), "left by dpkg -r: {left:?}");
        stdout_of(Command::new("dpkg").args(["--purge", "hoptrace"]));
        assert!(!installed());
        for dir in [
            "/usr/share/doc/hoptrace",
            "/usr/share/hoptrace",
            "/etc/hoptrace",
        ] {
            assert!(!Path::new(dir).exists(), "{dir} left after purge");
        }
        drop(guard);
    }

    /// `systemd-analyze verify` on an instance of each installed template,
    /// found by name in the system unit path (so the installed file is the
    /// one read), with the configuration files an instance reads.
    fn verify_installed_units() {
        let instance = format!("pkgtest{}", std::process::id());
        let etc = Path::new("/etc/hoptrace");
        let made_etc = !etc.exists();
        std::fs::create_dir_all(etc).unwrap();
        let configs = [
            etc.join(format!("trace-{instance}.env")),
            etc.join(format!("subscribe-{instance}.toml")),
        ];
        std::fs::write(&configs[0], "HOPTRACE_TRACE_ARGS=--iface lo\n").unwrap();
        std::fs::write(&configs[1], "[subscribe]\niface = \"lo\"\n").unwrap();
        let out = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(format!("hoptrace-trace@{instance}.service"))
            .arg(format!("hoptrace-subscribe@{instance}.service"))
            .arg("hoptrace-clock-serve.service")
            .output()
            .expect("systemd-analyze (scripts/setup.sh installs systemd)");
        for c in &configs {
            let _ = std::fs::remove_file(c);
        }
        if made_etc {
            let _ = std::fs::remove_dir(etc);
        }
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && said.trim().is_empty(), "{said}");
    }
}
