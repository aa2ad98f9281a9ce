//! The running kernel's build configuration: `/proc/config.gz`
//! (CONFIG_IKCONFIG_PROC) or else `/boot/config-<release>` with the release
//! from `/proc/sys/kernel/osrelease`. Either may be missing: the checks
//! that need it then say unknown.

use std::collections::BTreeMap;
use std::io::Read;

use crate::root::{Root, Unreadable};

/// `CONFIG_*` values (`y`, `m`, a number or string); unset options absent.
#[derive(Debug, Clone, Default)]
pub struct KConfig {
    /// Which file it came from.
    pub source: String,
    values: BTreeMap<String, String>,
}

impl KConfig {
    pub fn parse(text: &str, source: impl Into<String>) -> KConfig {
        let values = text
            .lines()
            .filter_map(|l| l.strip_prefix("CONFIG_")?.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
            .collect();
        KConfig {
            source: source.into(),
            values,
        }
    }

    /// `y` or `m`.
    pub fn enabled(&self, option: &str) -> bool {
        matches!(self.values.get(option).map(String::as_str), Some("y" | "m"))
    }

    pub fn value(&self, option: &str) -> Option<&str> {
        self.values.get(option).map(String::as_str)
    }

    /// Those of `options` that are enabled.
    pub fn enabled_of<'a>(&self, options: &[&'a str]) -> Vec<&'a str> {
        options
            .iter()
            .copied()
            .filter(|o| self.enabled(o))
            .collect()
    }

    /// Read the configuration of the audited kernel.
    pub fn read(root: &Root) -> Result<KConfig, Unreadable> {
        match root.read_bytes("/proc/config.gz") {
            Ok(gz) => {
                let mut text = String::new();
                flate2::read::GzDecoder::new(&gz[..])
                    .read_to_string(&mut text)
                    .map_err(|e| Unreadable::new("/proc/config.gz", format!("gunzip: {e}")))?;
                Ok(KConfig::parse(&text, "/proc/config.gz"))
            }
            Err(first) => {
                let release = root.read_trim("/proc/sys/kernel/osrelease").map_err(|e| {
                    Unreadable::new(
                        "/proc/config.gz and /boot/config-<release>",
                        format!("{}; release unknown: {}", first.why, e.why),
                    )
                })?;
                let p = format!("/boot/config-{release}");
                let text = root.read(&p).map_err(|e| {
                    Unreadable::new(
                        format!("/proc/config.gz and {p}"),
                        format!("{} / {}", first.why, e.why),
                    )
                })?;
                Ok(KConfig::parse(&text, p))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_lines_give_enabled_options_and_values() {
        let c = KConfig::parse(
            "CONFIG_PREEMPT_RT=y\n# CONFIG_PROVE_LOCKING is not set\nCONFIG_HZ=1000\nCONFIG_KVM=m\nCONFIG_LOCALVERSION=\"-rt\"\n",
            "test",
        );
        assert!(c.enabled("PREEMPT_RT") && c.enabled("KVM"));
        assert!(!c.enabled("PROVE_LOCKING") && !c.enabled("HZ"));
        assert_eq!(c.value("HZ"), Some("1000"));
        assert_eq!(c.value("LOCALVERSION"), Some("-rt"));
        assert_eq!(c.enabled_of(&["KVM", "PROVE_LOCKING"]), ["KVM"]);
    }

    #[test]
    fn a_gzipped_proc_config_and_a_boot_config_both_read() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("proc/sys/kernel")).unwrap();
        std::fs::create_dir_all(d.path().join("boot")).unwrap();
        let root = Root::new(d.path());
        assert!(KConfig::read(&root).is_err());
        std::fs::write(d.path().join("proc/sys/kernel/osrelease"), "6.1.0-rt\n").unwrap();
        std::fs::write(
            d.path().join("boot/config-6.1.0-rt"),
            "CONFIG_PREEMPT_RT=y\n",
        )
        .unwrap();
        let c = KConfig::read(&root).unwrap();
        assert_eq!(c.source, "/boot/config-6.1.0-rt");
        assert!(c.enabled("PREEMPT_RT"));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"CONFIG_NO_HZ_FULL=y\n").unwrap();
        std::fs::write(d.path().join("proc/config.gz"), gz.finish().unwrap()).unwrap();
        let c = KConfig::read(&root).unwrap();
        assert_eq!(c.source, "/proc/config.gz");
        assert!(c.enabled("NO_HZ_FULL") && !c.enabled("PREEMPT_RT"));
    }
}
