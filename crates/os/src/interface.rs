//! Network interfaces by name, in the network namespace of the calling
//! thread.
//!
//! Interface names are per network namespace, and namespaces are per thread:
//! `ip netns exec NS hoptrace ...` runs the whole process in `NS`, and
//! `hoptrace_netns::Netns::run_in` moves one thread there. The lookup is
//! `if_nametoindex(3)`, which asks the kernel through a socket the calling
//! thread opens, so it searches the calling thread's namespace. When the
//! name is not there, the error says which namespace that was (by its name
//! under `/run/netns`, found by comparing the device and inode of
//! `/proc/thread-self/ns/net` with each entry), which interfaces exist there
//! (`if_nameindex(3)`, same namespace; `/sys/class/net` would show the
//! namespace sysfs was mounted in instead), and what to do.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use thiserror::Error;

/// Where named network namespaces are (`ip netns add`).
const NETNS_RUN_DIR: &str = "/run/netns";

/// Why an interface name did not give an interface.
#[derive(Debug, Error)]
pub enum InterfaceError {
    #[error("interface name {0:?} is not valid: 1 to 15 bytes, no '/', no white space, no NUL")]
    BadName(String),
    #[error(
        "no interface `{name}` in {namespace} (interfaces there: {}): check the name with `{}`, \
         or run in the namespace that has it (`ip -all netns exec ip -br link` lists the \
         interfaces of every named namespace)",
        list_or_none(existing),
        namespace.list_command()
    )]
    NotFound {
        name: String,
        namespace: Namespace,
        existing: Vec<String>,
    },
    #[error("looking up interface `{name}`: {err}")]
    Io { name: String, err: io::Error },
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// A network namespace as a user names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Namespace {
    /// The namespace of PID 1 (the host's).
    Initial,
    /// A namespace with a name under `/run/netns` (`ip netns list`).
    Named(String),
    /// Any other namespace: its inode number (`net:[INODE]`).
    Unnamed(u64),
}

impl Namespace {
    /// The network namespace of the calling thread.
    pub fn current() -> Namespace {
        let Ok(me) = std::fs::metadata("/proc/thread-self/ns/net") else {
            return Namespace::Initial;
        };
        let same = |p: &Path| {
            std::fs::metadata(p).is_ok_and(|m| m.dev() == me.dev() && m.ino() == me.ino())
        };
        if let Ok(dir) = std::fs::read_dir(NETNS_RUN_DIR) {
            let mut names: Vec<String> = dir
                .flatten()
                .filter(|e| same(&e.path()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            if let Some(n) = names.into_iter().next() {
                return Namespace::Named(n);
            }
        }
        if same(Path::new("/proc/1/ns/net")) {
            Namespace::Initial
        } else {
            Namespace::Unnamed(me.ino())
        }
    }

    /// The command that lists this namespace's interfaces.
    pub fn list_command(&self) -> String {
        match self {
            Namespace::Named(n) => format!("ip -n {n} -br link"),
            _ => "ip -br link".to_string(),
        }
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Namespace::Initial => f.write_str("the initial network namespace"),
            Namespace::Named(n) => write!(f, "network namespace `{n}`"),
            Namespace::Unnamed(ino) => write!(f, "the unnamed network namespace net:[{ino}]"),
        }
    }
}

/// Whether `name` can be an interface name (`dev_valid_name` in the kernel).
fn check_name(name: &str) -> Result<CString, InterfaceError> {
    let bad = || InterfaceError::BadName(name.to_string());
    if name.is_empty()
        || name.len() > 15
        || name == "."
        || name == ".."
        || name.contains(['/', ':'])
        || name.chars().any(char::is_whitespace)
    {
        return Err(bad());
    }
    CString::new(name).map_err(|_| bad())
}

/// Index of interface `name` in the calling thread's network namespace.
pub fn interface_index(name: &str) -> Result<u32, InterfaceError> {
    let c = check_name(name)?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index != 0 {
        return Ok(index);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::ENODEV) {
        return Err(InterfaceError::Io {
            name: name.to_string(),
            err,
        });
    }
    Err(InterfaceError::NotFound {
        name: name.to_string(),
        namespace: Namespace::current(),
        existing: interface_names().unwrap_or_default(),
    })
}

/// Names of the interfaces of the calling thread's network namespace, in
/// index order.
pub fn interface_names() -> io::Result<Vec<String>> {
    // SAFETY: if_nameindex returns an array ended by a zero entry, freed
    // below with if_freenameindex; names are NUL-terminated strings.
    unsafe {
        let list = libc::if_nameindex();
        if list.is_null() {
            return Err(io::Error::last_os_error());
        }
        let mut names = Vec::new();
        let mut at = list;
        while (*at).if_index != 0 && !(*at).if_name.is_null() {
            names.push(
                std::ffi::CStr::from_ptr((*at).if_name)
                    .to_string_lossy()
                    .into_owned(),
            );
            at = at.add(1);
        }
        libc::if_freenameindex(list);
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_kernel_would_refuse_are_refused_before_any_lookup() {
        for name in [
            "",
            "a-name-longer-than-15",
            "a/b",
            "a b",
            "a:1",
            "..",
            "x\0y",
        ] {
            let err = interface_index(name).unwrap_err();
            assert!(matches!(err, InterfaceError::BadName(_)), "{name:?}: {err}");
            assert!(err.to_string().contains("1 to 15 bytes"), "{err}");
        }
    }

    #[test]
    fn the_loopback_interface_has_an_index() {
        assert!(interface_index("lo").unwrap() > 0);
        assert!(interface_names().unwrap().contains(&"lo".to_string()));
    }

    #[test]
    fn a_wrong_interface_name_says_where_it_looked_what_is_there_and_what_to_do() {
        let err = interface_index("ht-nosuch0").unwrap_err();
        let text = err.to_string();
        let here = Namespace::current();
        assert!(
            text.starts_with(&format!(
                "no interface `ht-nosuch0` in {here} (interfaces there: "
            )),
            "{text}"
        );
        assert!(
            text.contains("lo"),
            "the interfaces there are listed: {text}"
        );
        assert!(text.contains(&here.list_command()), "{text}");
        assert!(text.contains("ip -all netns exec ip -br link"), "{text}");
    }

    #[test]
    fn a_namespace_is_named_as_a_user_would() {
        assert_eq!(
            Namespace::Named("ht-demo-pub".into()).to_string(),
            "network namespace `ht-demo-pub`"
        );
        assert_eq!(
            Namespace::Named("ht-demo-pub".into()).list_command(),
            "ip -n ht-demo-pub -br link"
        );
        assert_eq!(
            Namespace::Initial.to_string(),
            "the initial network namespace"
        );
        assert_eq!(Namespace::Initial.list_command(), "ip -br link");
        assert_eq!(
            Namespace::Unnamed(4026531840).to_string(),
            "the unnamed network namespace net:[4026531840]"
        );
    }

    #[test]
    fn an_empty_namespace_is_said_to_have_no_interfaces() {
        let err = InterfaceError::NotFound {
            name: "eth0".into(),
            namespace: Namespace::Named("x".into()),
            existing: vec![],
        };
        assert!(
            err.to_string().contains("(interfaces there: none)"),
            "{err}"
        );
    }
}
