//! Every `hoptrace` command line shown in the README and in `docs/` is
//! accepted by the binary's own parser: every subcommand, flag and value
//! must exist and be valid, and every required argument be given
//! (`extract` reads them from the documents). Which of them also run, and
//! where, is `tests/cli/docs_run.rs`; the README tour itself runs in
//! `tests/cli/readme_tour.rs`.

mod extract;

use extract::{commands_in, documents};

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
                refused.push(format!("{}: `{}`: {first}", c.place(), c.words.join(" ")));
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
    assert_eq!(c[1].place(), "x.md:3");
    // Both commands of the sh block are of the block opened on line 1.
    assert!(c.iter().all(|x| x.block == 1), "{c:?}");
    let piped = commands_in(
        "y.md",
        "```sh\nvirsh dumpxml r1 | hoptrace doctor --domain-xml -\n```\n",
    );
    assert_eq!(piped[0].piped_from.as_deref(), Some("virsh"));
    assert_eq!(c[0].piped_from, None);
    // A comment with an unpaired quote does not hide its line's command.
    let commented = commands_in(
        "z.md",
        "```sh\nhoptrace lab status   # the bridge's lab\n```\n",
    );
    assert_eq!(commented.len(), 1, "{commented:?}");
    assert_eq!(commented[0].words, ["hoptrace", "lab", "status"]);
    // A flag that does not exist is refused by the parser the test uses.
    let bad: Vec<String> = ["hoptrace", "report", "r", "--no-such-flag"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert!(crate::parse_command_line(&bad).is_err());
}
