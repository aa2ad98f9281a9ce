//! How a command's end becomes its exit status: the table is
//! [`hoptrace_os::Exit`] (docs/exit-codes.md). A command returns its
//! verdict (`Ok(Exit::GateFailed.into())`, ...); an error returned instead
//! is a usage error when something in its chain is a [`UsageError`] or an
//! output refused by `hoptrace_record::output` (nothing was done), and an
//! error (1) otherwise. clap's own errors exit with 2 as well.
//!
//! The message is the error's chain joined by `: ` ([`message_of`]), each
//! thing said once: many errors print their cause inside their own text
//! (`/x: No such file or directory`) and give it as their source too, so a
//! cause already at the end of the text is not repeated, nor a path the
//! context just named.

use hoptrace_os::Exit;

/// A refusal of the command line found by a command before it did
/// anything (clap cannot express it): exits with [`Exit::Usage`].
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// `message` as a usage error.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}

/// The message of a failed command: the causes of `err` joined by `: `,
/// without repeating a cause the text already ends with or the path the
/// text ends with at the start of the next cause.
pub fn message_of(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let next = cause.to_string();
        if text.is_empty() {
            text = next;
            continue;
        }
        if text.ends_with(next.as_str()) {
            continue;
        }
        // `cannot open recording /x` then `/x: No such file...`.
        let last_word = text.rsplit(' ').next().unwrap_or_default().to_string();
        let next = match next.strip_prefix(last_word.as_str()) {
            Some(rest) if !last_word.is_empty() && rest.starts_with(": ") => &rest[2..],
            _ => next.as_str(),
        };
        if text.ends_with(next) {
            continue;
        }
        text.push_str(": ");
        text.push_str(next);
    }
    text
}

/// The exit status of a command that failed with `err`.
pub fn status_of(err: &anyhow::Error) -> Exit {
    let refused = err.chain().any(|cause| {
        cause.is::<UsageError>()
            || matches!(
                cause.downcast_ref::<hoptrace_record::OutputError>(),
                Some(hoptrace_record::OutputError::Refused(_))
            )
    });
    if refused {
        Exit::Usage
    } else {
        Exit::Error
    }
}

/// The table in one paragraph, for `--help`.
pub fn help_text() -> String {
    format!(
        "Exit status: {} (docs/exit-codes.md).",
        hoptrace_os::Exit::summary()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn a_refused_output_and_a_usage_error_are_usage_whatever_the_context_around_them() {
        let refused: anyhow::Error =
            hoptrace_record::OutputError::Refused("the output x is the input x".into()).into();
        assert_eq!(status_of(&refused.context("hoptrace join")), Exit::Usage);
        let e: anyhow::Result<()> = Err(usage("--io does nothing here"));
        assert_eq!(status_of(&e.context("lab run").unwrap_err()), Exit::Usage);
        let io: anyhow::Error = hoptrace_record::OutputError::Io {
            path: "x".into(),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        }
        .into();
        assert_eq!(status_of(&io), Exit::Error);
        assert_eq!(status_of(&anyhow::anyhow!("cannot open")), Exit::Error);
    }

    /// An error that prints its source inside its own text, as many do.
    #[derive(Debug)]
    struct PathError(String, std::io::Error);
    impl std::fmt::Display for PathError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}: {}", self.0, self.1)
        }
    }
    impl std::error::Error for PathError {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.1)
        }
    }

    #[test]
    fn a_missing_path_is_said_once_with_its_cause_once() {
        let missing = || std::io::Error::from_raw_os_error(2);
        let e = anyhow::Error::new(PathError("/nope".into(), missing()))
            .context("cannot open recording /nope");
        assert_eq!(
            message_of(&e),
            "cannot open recording /nope: No such file or directory (os error 2)"
        );
        let e = anyhow::Error::new(missing()).context("cannot read config file /x.toml");
        assert_eq!(
            message_of(&e),
            "cannot read config file /x.toml: No such file or directory (os error 2)"
        );
        // Different causes all stay.
        let e = anyhow::anyhow!("bad byte")
            .context("frame 3")
            .context("reading x.pcap");
        assert_eq!(message_of(&e), "reading x.pcap: frame 3: bad byte");
    }
}
