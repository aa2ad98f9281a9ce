//! Every `hoptrace` command line shown in the README and in `docs/` is
//! accepted by the binary's own parser.
//!
//! The command lines are read from the shell code blocks of the Markdown
//! files (fences without a language, `sh`, `bash`, `console`): a line is
//! joined with its `\` continuations, cut into shell words (quotes kept
//! together, `$VAR` and `$(...)` replaced by a value of the right shape),
//! split at `|`, `&&`, `||`, `;`, `&` and cut at a redirection or a comment.
//! Each piece that runs `hoptrace` (directly, after `sudo` or `ip netns exec
//! NS`, or inside `hoptrace lab exec LAB NODE -- ...`) is parsed as `main`
//! parses it: every subcommand, flag and value must exist and be valid, and
//! every required argument be given. Lines of program output in a block
//! (`hoptrace kvm: this kernel ...`) are recognised by a word ending in `:`
//! and left out. The README tour itself also runs (tests/cli/readme_tour.rs).

use std::path::{Path, PathBuf};

/// One command line of a document: where it is, and its words.
#[derive(Debug)]
struct DocCommand {
    place: String,
    words: Vec<String>,
}

/// Shell words of `line`, with variables and command substitutions
/// replaced by a plausible value; `None` after an unclosed quote.
fn shell_words(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some(q) if q == c => break,
                        Some(x) => word.push(x),
                        None => return None,
                    }
                }
            }
            '$' if chars.peek() == Some(&'(') => {
                // `$(pgrep qemu)`: a PID.
                let mut depth = 0;
                for x in chars.by_ref() {
                    match x {
                        '(' => depth += 1,
                        ')' if depth == 1 => break,
                        ')' => depth -= 1,
                        _ => {}
                    }
                }
                word.push_str("4242");
                in_word = true;
            }
            '$' => {
                // `$T`, `${T}`, `$!`: a path component.
                if chars.peek() == Some(&'{') {
                    for x in chars.by_ref() {
                        if x == '}' {
                            break;
                        }
                    }
                } else {
                    while chars
                        .peek()
                        .is_some_and(|x| x.is_ascii_alphanumeric() || *x == '_' || *x == '!')
                    {
                        chars.next();
                    }
                }
                word.push_str("/tmp/doc");
                in_word = true;
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

/// The pieces of a line that are commands: split at `|`, `&&`, `||`, `;`
/// and `&`; each cut at a redirection or a comment.
fn pieces(words: &[String]) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new()];
    let mut cut = false;
    for w in words {
        if ["|", "||", "&&", ";", "&"].contains(&w.as_str()) {
            out.push(Vec::new());
            cut = false;
            continue;
        }
        if w.starts_with('#') || w.starts_with('>') || w.starts_with("2>") || w.starts_with('<') {
            cut = true;
        }
        if !cut {
            out.last_mut().unwrap().push(w.clone());
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

/// The `hoptrace` command lines of a piece (the piece itself, and the
/// command inside `hoptrace lab exec LAB NODE -- ...`).
fn hoptrace_commands(piece: &[String]) -> Vec<Vec<String>> {
    let mut w: &[String] = piece;
    if w.first().is_some_and(|x| x == "$") {
        w = &w[1..];
    }
    if w.first().is_some_and(|x| x == "sudo") {
        w = &w[1..];
    }
    if w.len() > 3 && w[0] == "ip" && w[1] == "netns" && w[2] == "exec" {
        w = &w[4..];
    }
    if w.first().is_none_or(|x| x != "hoptrace") {
        return Vec::new();
    }
    // Output, not a command: `hoptrace kvm: this kernel has no ...`.
    if w.iter().take(4).any(|x| x.ends_with(':')) {
        return Vec::new();
    }
    let mut out = vec![w.to_vec()];
    if w.get(1).is_some_and(|x| x == "lab") && w.get(2).is_some_and(|x| x == "exec") {
        if let Some(dash) = w.iter().position(|x| x == "--") {
            out.extend(hoptrace_commands(&w[dash + 1..]));
        }
    }
    out
}

/// The command lines of the shell blocks of `text` (`file` names them).
fn commands_in(file: &str, text: &str) -> Vec<DocCommand> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut shell_block = None::<bool>;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(lang) = line.strip_prefix("```") {
            shell_block = match shell_block {
                Some(_) => None,
                None => Some(["", "sh", "bash", "console"].contains(&lang.trim())),
            };
            i += 1;
            continue;
        }
        let start = i + 1;
        let mut joined = line.to_string();
        while joined.ends_with('\\') && i + 1 < lines.len() {
            joined.pop();
            i += 1;
            joined.push(' ');
            joined.push_str(lines[i].trim());
        }
        i += 1;
        if shell_block != Some(true) {
            continue;
        }
        let Some(words) = shell_words(&joined) else {
            continue;
        };
        for piece in pieces(&words) {
            for words in hoptrace_commands(&piece) {
                out.push(DocCommand {
                    place: format!("{file}:{start}"),
                    words,
                });
            }
        }
    }
    out
}

fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

#[test]
fn every_hoptrace_command_shown_in_the_readme_and_the_docs_is_accepted_by_the_parser() {
    let mut checked = 0;
    let mut refused = Vec::new();
    for path in documents() {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for c in commands_in(&name, &text) {
            checked += 1;
            if let Err(e) = crate::parse_command_line(&c.words) {
                // `hoptrace --version` is answered by printing, not refused
                if e.kind() == clap::error::ErrorKind::DisplayVersion {
                    continue;
                }
                let first = e.to_string().lines().next().unwrap_or_default().to_string();
                refused.push(format!("{}: `{}`: {first}", c.place, c.words.join(" ")));
            }
        }
    }
    assert!(
        refused.is_empty(),
        "{} of {checked} documented command lines are refused:\n{}",
        refused.len(),
        refused.join("\n")
    );
    // The README's tour and the docs' examples were found.
    assert!(checked >= 60, "only {checked} command lines found");
}

#[test]
fn a_documented_line_is_cut_into_the_commands_it_runs() {
    let md = "```sh\nip netns exec ht-t-hyp hoptrace trace --iface in0 > $T/t.txt & tr=$!\n\
              hoptrace lab exec demo vm -- hoptrace sv subscribe \\\n  --iface eth0 # note\n\
              hoptrace kvm: this kernel has no kvm tracepoint\n```\n\
              ```text\nhoptrace sv dump x\n```\n";
    let c = commands_in("x.md", md);
    let words: Vec<String> = c.iter().map(|c| c.words.join(" ")).collect();
    assert_eq!(
        words,
        [
            "hoptrace trace --iface in0",
            "hoptrace lab exec demo vm -- hoptrace sv subscribe --iface eth0",
            "hoptrace sv subscribe --iface eth0",
        ]
    );
    assert_eq!(c[1].place, "x.md:3");
    // A flag that does not exist is refused by the parser the test uses.
    let bad: Vec<String> = ["hoptrace", "report", "r", "--no-such-flag"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert!(crate::parse_command_line(&bad).is_err());
}
