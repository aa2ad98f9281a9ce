//! `hoptrace generate DIR` (hidden): the man pages and shell completions,
//! made from the command definitions themselves so that they never drift
//! from `--help`.
//!
//! The packaging (`scripts/package.sh`) runs the release binary with this
//! command and ships what it writes:
//! - `DIR/man/hoptrace.1` and one page per subcommand at every depth,
//!   named by its path (`hoptrace-trace.1`, `hoptrace-sv-publish.1`), by
//!   clap_mangen from the same `clap::Command` that parses the command line
//!   (with the exit statuses that close every `--help`);
//! - `DIR/completions/hoptrace.bash`, `_hoptrace` (zsh) and `hoptrace.fish`,
//!   by clap_complete.
//!
//! Hidden commands (this one) get neither a page nor a completion. DIR must
//! be empty or absent: the command writes files and never replaces one.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap_complete::Shell;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory to write `man/` and `completions/` into (absent or empty).
    pub dir: PathBuf,
}

/// The shells completions are written for.
pub const SHELLS: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

pub fn run(args: Args, cmd: clap::Command) -> Result<ExitCode> {
    let dir = &args.dir;
    if dir.exists() && dir.read_dir()?.next().is_some() {
        bail!(
            "{} is not empty: `hoptrace generate` writes into an empty or new directory",
            dir.display()
        );
    }
    let man = dir.join("man");
    let completions = dir.join("completions");
    for d in [&man, &completions] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    clap_mangen::generate_to(cmd.clone(), &man)
        .with_context(|| format!("writing man pages into {}", man.display()))?;
    let mut cmd = without_hidden_subcommands(&cmd);
    for shell in SHELLS {
        clap_complete::generate_to(shell, &mut cmd, "hoptrace", &completions).with_context(
            || {
                format!(
                    "writing the {shell} completion into {}",
                    completions.display()
                )
            },
        )?;
    }
    let pages = count_files(&man)?;
    println!(
        "{} man pages in {}, completions for bash, zsh, fish in {}",
        pages,
        man.display(),
        completions.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `cmd` with the same arguments and only its visible subcommands: the
/// completions would otherwise offer the hidden ones (clap_complete lists
/// every subcommand).
fn without_hidden_subcommands(cmd: &clap::Command) -> clap::Command {
    let mut visible = clap::Command::new("hoptrace")
        .args(cmd.get_arguments().cloned())
        .subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    if let Some(about) = cmd.get_about() {
        visible = visible.about(about.clone());
    }
    visible
}

fn count_files(dir: &Path) -> Result<usize> {
    Ok(std::fs::read_dir(dir)?.count())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every visible command at every depth, as `hoptrace sv publish`,
    /// walked here without clap_mangen.
    fn command_paths(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        out.push(path.to_string());
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            command_paths(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    #[test]
    fn every_command_in_the_clap_tree_gets_a_man_page_that_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("gen");
        run(Args { dir: out.clone() }, crate::cli_command()).unwrap();
        let mut paths = Vec::new();
        command_paths(&crate::cli_command(), "hoptrace", &mut paths);
        assert!(paths.len() > 30, "{paths:?}");
        for path in &paths {
            let page = out
                .join("man")
                .join(format!("{}.1", path.replace(' ', "-")));
            let text = std::fs::read_to_string(&page)
                .unwrap_or_else(|e| panic!("{path}: no page {}: {e}", page.display()));
            // the NAME section names the command, every dash escaped
            // (roff): `hoptrace\-sv\-publish \- ...`, `hoptrace\-sample\-to\-trip`
            let name = format!(".SH NAME\n{} \\- ", path.replace(['-', ' '], "\\-"));
            assert!(text.contains(&name), "{}: no {name:?}", page.display());
        }
        let written = std::fs::read_dir(out.join("man")).unwrap().count();
        assert_eq!(written, paths.len(), "one page per command, no other");
        let mut shells: Vec<String> = std::fs::read_dir(out.join("completions"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        shells.sort();
        assert_eq!(shells, ["_hoptrace", "hoptrace.bash", "hoptrace.fish"]);
        let bash = std::fs::read_to_string(out.join("completions/hoptrace.bash")).unwrap();
        assert!(
            bash.contains("hoptrace__subcmd__trace") || bash.contains("hoptrace,trace"),
            "{bash}"
        );
        assert!(!bash.contains("generate"), "the hidden command is offered");
    }

    #[test]
    fn generate_refuses_a_directory_with_files_and_leaves_them_alone() {
        let dir = tempfile::tempdir().unwrap();
        let keep = dir.path().join("notes.txt");
        std::fs::write(&keep, "mine").unwrap();
        let e = run(
            Args {
                dir: dir.path().to_path_buf(),
            },
            crate::cli_command(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("is not empty"), "{e}");
        assert_eq!(std::fs::read_to_string(&keep).unwrap(), "mine");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
