//! The `hoptrace` command lines of the README and `docs/*.md`, as the
//! shell would run them (shared by the parser test, `super`, and the test
//! that runs them, `tests/cli/docs_run.rs`, which includes this file).
//!
//! The command lines are read from the shell code blocks of the Markdown
//! files (fences without a language, `sh`, `bash`, `console`): a line is
//! joined with its `\` continuations, cut into shell words (quotes kept
//! together, `$VAR` replaced by [`VAR`] and `$(...)` by a PID), split at
//! `|`, `&&`, `||`, `;`, `&` and cut at a redirection or a comment. Each
//! piece that runs `hoptrace` (directly, after `sudo` or `ip netns exec
//! NS`, or inside `hoptrace lab exec LAB NODE -- ...`) is a command; the
//! program a `|` feeds it from and the block it is in are kept (`virsh dumpxml relay1 | hoptrace
//! doctor --domain-xml -`). Lines of program output in a block (`hoptrace
//! kvm: this kernel ...`) are recognised by a word ending in `:` and left
//! out.

use std::path::{Path, PathBuf};

/// What a shell variable (`$T`, `${T}`, `$!`) stands for in the commands:
/// a directory (`$T/sub` is `/tmp/doc/sub`).
pub const VAR: &str = "/tmp/doc";

/// One command line of a document: where it is, and its words.
#[derive(Debug, Clone)]
pub struct DocCommand {
    /// The document's file name (`README.md`, `goose.md`).
    pub file: String,
    /// The line it starts on (1-based).
    pub line: usize,
    /// The line its code block starts on (the commands of a block run
    /// top to bottom, in one directory).
    pub block: usize,
    pub words: Vec<String>,
    /// The program whose output a `|` feeds into it (`virsh`).
    pub piped_from: Option<String>,
}

impl DocCommand {
    /// `goose.md:25`
    pub fn place(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
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
                word.push_str(VAR);
                in_word = true;
            }
            // A comment (its words may hold an unpaired quote: `bridge's`).
            '#' if !in_word => break,
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
/// and `&`; each cut at a redirection or a comment; with the first word of
/// the piece a `|` feeds it from.
fn pieces(words: &[String]) -> Vec<(Vec<String>, Option<String>)> {
    let mut out: Vec<(Vec<String>, Option<String>)> = vec![(Vec::new(), None)];
    let mut cut = false;
    for w in words {
        if w.starts_with('#') {
            break;
        }
        if ["|", "||", "&&", ";", "&"].contains(&w.as_str()) {
            let from = (w == "|")
                .then(|| out.last().and_then(|p| p.0.first().cloned()))
                .flatten();
            out.push((Vec::new(), from));
            cut = false;
            continue;
        }
        if w.starts_with('>') || w.starts_with("2>") || w.starts_with('<') {
            cut = true;
        }
        if !cut {
            out.last_mut().unwrap().0.push(w.clone());
        }
    }
    out.retain(|p| !p.0.is_empty());
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
pub fn commands_in(file: &str, text: &str) -> Vec<DocCommand> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut shell_block = None::<bool>;
    let mut block = 0;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(lang) = line.strip_prefix("```") {
            block = i + 1;
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
        for (piece, piped_from) in pieces(&words) {
            for words in hoptrace_commands(&piece) {
                out.push(DocCommand {
                    file: file.to_string(),
                    line: start,
                    block,
                    words,
                    piped_from: piped_from.clone(),
                });
            }
        }
    }
    out
}

pub fn documents() -> Vec<PathBuf> {
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
