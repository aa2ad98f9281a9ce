//! `hoptrace --version`: the package version, the git commit the binary
//! was built from (set by `build.rs`) and the BPF backends compiled in.
//!
//! The backends are read from the embedded BPF object
//! ([`hoptrace_probes::backends::compiled_in`]: opened, not loaded, so no
//! privilege is needed), which is why `--version` is answered here and not
//! by clap's static version string; `-V` stays clap's one line
//! ([`SHORT`]). The package version is the workspace's (`Cargo.toml`), the
//! same one the Debian and RPM packages carry.

/// `0.1.0 (commit 0123456789ab)`: clap's `-V` line after the name.
pub const SHORT: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("HOPTRACE_GIT_COMMIT"),
    ")"
);

/// The text `hoptrace --version` prints: name and version, commit, and the
/// kinds of BPF program the binary carries (or why they could not be read).
pub fn long_text() -> String {
    let backends = match hoptrace_probes::backends::compiled_in() {
        Ok(kinds) => kinds.join(" "),
        Err(e) => format!("unreadable: {e}"),
    };
    format!(
        "hoptrace {}\ncommit: {}\nbpf backends: {backends}\n  (tp_btf, else raw_tp, traces the hops; fentry and kprobe are only probed: `hoptrace trace --list-backends`)\n",
        env!("CARGO_PKG_VERSION"),
        env!("HOPTRACE_GIT_COMMIT"),
    )
}

/// Whether the command line (`argv[0]` first) is exactly `hoptrace --version`.
pub fn is_long_version_request(argv: &[std::ffi::OsString]) -> bool {
    argv.len() == 2 && argv[1] == "--version"
}
