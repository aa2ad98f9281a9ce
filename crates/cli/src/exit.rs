//! How a command's end becomes its exit status: the table is
//! [`hoptrace_os::Exit`] (docs/exit-codes.md). A command returns its
//! verdict (`Ok(Exit::GateFailed.into())`, ...); an error returned instead
//! is a usage error when something in its chain is a [`UsageError`] or an
//! output refused by `hoptrace_record::output` (nothing was done), and an
//! error (1) otherwise. clap's own errors exit with 2 as well.

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
}
