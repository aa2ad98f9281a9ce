//! libvirt through `virsh`: a domain's XML, its state and what its QEMU
//! monitor says about its threads.
//!
//! Mechanism: every query is one `virsh -c URI ...` process (docs/vms.md
//! says why `virsh` and not the `virt` crate). The answers read are
//! structured where libvirt offers it: `dumpxml` (the domain format, read
//! by [`crate::domain_xml`]), `domstate`, `list --all --name`, and QMP
//! through `qemu-monitor-command` (JSON: `query-cpus-fast` gives each
//! vCPU's index and host thread id, `query-iothreads` each iothread's id and
//! thread id). A query that fails is told apart by `virsh`'s own message:
//! libvirt not answering at the URI, a domain it does not know (then the
//! domains it does know are listed), a domain that is not running (QMP
//! refused), or anything else (passed on as it is).

use std::process::Command;

use serde::Deserialize;

/// The connection every command uses unless `--connect` says otherwise.
pub const DEFAULT_URI: &str = "qemu:///system";

/// Why a libvirt query failed.
#[derive(Debug, thiserror::Error)]
pub enum VirshError {
    #[error(
        "virsh was not found ({0}): install libvirt-clients (Debian) or libvirt-client (RHEL)"
    )]
    NotInstalled(String),
    #[error(
        "libvirt does not answer at {uri}: {message}\n  is libvirtd running? start it (`systemctl start libvirtd`, \
         or `libvirtd -d` without systemd), or name the connection with --connect URI \
         (e.g. qemu:///system, or qemu:///system?socket=PATH for a private daemon)"
    )]
    NotRunning { uri: String, message: String },
    #[error(
        "libvirt at {uri} has no domain named {name:?}; the domains there: {}",
        list_or_none(known)
    )]
    NoSuchDomain {
        uri: String,
        name: String,
        known: Vec<String>,
    },
    #[error("domain {name:?} is not running, so its QEMU cannot be asked: {message}")]
    NotRunningDomain { name: String, message: String },
    #[error("virsh {args}: {message}")]
    Failed { args: String, message: String },
    #[error("virsh {args} printed what is not the expected JSON: {message}")]
    BadAnswer { args: String, message: String },
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// One vCPU as QEMU reports it (an entry of QMP `query-cpus-fast`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct QmpVcpu {
    #[serde(rename = "cpu-index")]
    pub index: u32,
    #[serde(rename = "thread-id")]
    pub thread_id: u32,
}

/// One iothread as QEMU reports it (an entry of QMP `query-iothreads`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct QmpIothread {
    pub id: String,
    #[serde(rename = "thread-id")]
    pub thread_id: u32,
}

/// A libvirt connection, driven through `virsh`.
#[derive(Debug, Clone)]
pub struct Virsh {
    pub uri: String,
    program: String,
}

impl Virsh {
    pub fn new(uri: &str) -> Virsh {
        Virsh {
            uri: uri.to_string(),
            program: "virsh".into(),
        }
    }

    /// Run `virsh -c URI ARGS`, returning its standard output.
    fn run(&self, args: &[&str]) -> Result<String, VirshError> {
        let out = Command::new(&self.program)
            .arg("-c")
            .arg(&self.uri)
            .args(args)
            .output()
            .map_err(|e| VirshError::NotInstalled(e.to_string()))?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        let message = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Err(classify(&self.uri, args, message))
    }

    /// The names of every domain, running or not.
    pub fn domains(&self) -> Result<Vec<String>, VirshError> {
        Ok(self
            .run(&["list", "--all", "--name"])?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect())
    }

    /// Turn "no such domain" into a message that lists the known ones.
    fn about_domain(&self, name: &str, err: VirshError) -> VirshError {
        match err {
            VirshError::Failed { message, .. } if is_no_such_domain(&message) => {
                VirshError::NoSuchDomain {
                    uri: self.uri.clone(),
                    name: name.to_string(),
                    known: self.domains().unwrap_or_default(),
                }
            }
            other => other,
        }
    }

    /// The domain's live XML (`virsh dumpxml`).
    pub fn dumpxml(&self, name: &str) -> Result<String, VirshError> {
        self.run(&["dumpxml", "--", name])
            .map_err(|e| self.about_domain(name, e))
    }

    /// `running`, `shut off`, `paused`, ... (`virsh domstate`).
    pub fn state(&self, name: &str) -> Result<String, VirshError> {
        Ok(self
            .run(&["domstate", "--", name])
            .map_err(|e| self.about_domain(name, e))?
            .trim()
            .to_string())
    }

    fn qmp(&self, name: &str, command: &str) -> Result<serde_json::Value, VirshError> {
        let query = format!("{{\"execute\":\"{command}\"}}");
        let args = ["qemu-monitor-command", "--", name, query.as_str()];
        let text = self
            .run(&args)
            .map_err(|e| match self.about_domain(name, e) {
                VirshError::Failed { message, .. } if message.contains("not running") => {
                    VirshError::NotRunningDomain {
                        name: name.to_string(),
                        message,
                    }
                }
                other => other,
            })?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| VirshError::BadAnswer {
                args: args.join(" "),
                message: e.to_string(),
            })?;
        Ok(v.get("return").cloned().unwrap_or(serde_json::Value::Null))
    }

    /// Each vCPU's index and host thread id (QMP `query-cpus-fast`).
    pub fn vcpus(&self, name: &str) -> Result<Vec<QmpVcpu>, VirshError> {
        let v = self.qmp(name, "query-cpus-fast")?;
        serde_json::from_value(v).map_err(|e| VirshError::BadAnswer {
            args: format!("qemu-monitor-command {name} query-cpus-fast"),
            message: e.to_string(),
        })
    }

    /// Each iothread's id and host thread id (QMP `query-iothreads`).
    pub fn iothreads(&self, name: &str) -> Result<Vec<QmpIothread>, VirshError> {
        let v = self.qmp(name, "query-iothreads")?;
        serde_json::from_value(v).map_err(|e| VirshError::BadAnswer {
            args: format!("qemu-monitor-command {name} query-iothreads"),
            message: e.to_string(),
        })
    }
}

fn is_no_such_domain(message: &str) -> bool {
    message.contains("Domain not found") || message.contains("failed to get domain")
}

/// Tell a connection failure from the rest by virsh's message.
fn classify(uri: &str, args: &[&str], message: String) -> VirshError {
    let connection = message.contains("failed to connect to the hypervisor")
        || message.contains("Failed to connect socket")
        || message.contains("no valid connection");
    if connection {
        VirshError::NotRunning {
            uri: uri.to_string(),
            message: first_error_line(&message),
        }
    } else {
        VirshError::Failed {
            args: args.join(" "),
            message: first_error_line(&message),
        }
    }
}

/// virsh prints `error: ...` lines; the most specific one is the last.
fn first_error_line(message: &str) -> String {
    let lines: Vec<&str> = message
        .lines()
        .map(|l| l.trim().trim_start_matches("error:").trim())
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        "virsh failed without a message".into()
    } else {
        lines.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_connection_is_told_apart_from_a_failed_query() {
        let e = classify(
            "qemu:///system",
            &["dumpxml", "x"],
            "error: failed to connect to the hypervisor\nerror: Failed to connect socket to '/run/libvirt/libvirt-sock': No such file or directory".into(),
        );
        let text = e.to_string();
        assert!(matches!(e, VirshError::NotRunning { .. }), "{text}");
        assert!(
            text.contains("libvirtd -d") && text.contains("--connect"),
            "{text}"
        );
        assert!(text.contains("No such file or directory"), "{text}");

        let e = classify(
            "qemu:///system",
            &["dumpxml", "x"],
            "error: failed to get domain 'x'".into(),
        );
        assert!(matches!(&e, VirshError::Failed { message, .. } if is_no_such_domain(message)));
    }

    #[test]
    fn an_unknown_domain_names_the_ones_that_exist_or_says_there_are_none() {
        let e = VirshError::NoSuchDomain {
            uri: "qemu:///system".into(),
            name: "relay9".into(),
            known: vec!["relay1".into(), "relay2".into()],
        };
        assert!(
            e.to_string().ends_with("the domains there: relay1, relay2"),
            "{e}"
        );
        let e = VirshError::NoSuchDomain {
            uri: "qemu:///system".into(),
            name: "relay9".into(),
            known: vec![],
        };
        assert!(e.to_string().ends_with("the domains there: none"), "{e}");
    }

    #[test]
    fn a_missing_virsh_says_which_package_brings_it() {
        let mut v = Virsh::new(DEFAULT_URI);
        v.program = "/nonexistent/virsh".into();
        let e = v.domains().unwrap_err();
        assert!(e.to_string().contains("libvirt-clients"), "{e}");
    }
}
