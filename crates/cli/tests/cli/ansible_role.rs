//! The Ansible role in `deploy/ansible/` (SEAPATH-shaped: defaults, tasks,
//! handlers, templates, meta; playbooks beside it): ansible-lint passes, and
//! (root) the install playbook against this host, `connection: local`,
//! changes on the first run and reports `changed=0` on the second, with the
//! package installed, the configuration written as the units read it, and
//! `systemd-analyze verify` accepting each configured instance. Service
//! management is off (this host's PID 1 is not systemd; the tasks that start
//! services are skipped), so nothing is started.

use crate::packaging::{deb_package, root, stdout_of};

use std::path::Path;
use std::process::Command;

fn ansible_dir() -> std::path::PathBuf {
    root().join("deploy/ansible")
}

#[test]
fn the_ansible_role_and_playbooks_pass_ansible_lint() {
    let out = Command::new("ansible-lint")
        .args(["--offline", "-p", "roles/hoptrace", "playbooks"])
        .current_dir(ansible_dir())
        .env("ANSIBLE_ROLES_PATH", ansible_dir().join("roles"))
        .output()
        .expect("ansible-lint (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "ansible-lint:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

mod privileged {
    use super::*;

    /// What the playbook put on this host, removed when dropped.
    struct Cleanup {
        instance: String,
        made_etc: bool,
    }
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = Command::new("dpkg").args(["--purge", "hoptrace"]).output();
            let etc = Path::new("/etc/hoptrace");
            for f in [
                format!("subscribe-{}.toml", self.instance),
                format!("trace-{}.env", self.instance),
                "station.scd".to_string(),
            ] {
                let _ = std::fs::remove_file(etc.join(f));
            }
            if self.made_etc {
                let _ = std::fs::remove_dir(etc);
            }
            let deb = deb_package().file_name().unwrap().to_owned();
            let _ = std::fs::remove_file(Path::new("/var/cache").join(deb));
        }
    }

    /// The `changed=` count of the play recap's line for localhost.
    fn changed(recap: &str) -> u32 {
        let line = recap
            .lines()
            .rfind(|l| l.starts_with("localhost") && l.contains("changed="))
            .unwrap_or_else(|| panic!("no recap line:\n{recap}"));
        assert!(
            line.contains("failed=0") && line.contains("unreachable=0"),
            "{line}"
        );
        let n = line.split("changed=").nth(1).unwrap();
        n.split_whitespace().next().unwrap().parse().unwrap()
    }

    #[test]
    fn the_install_playbook_changes_once_then_nothing_and_writes_what_the_units_read() {
        if !hoptrace_netns::require_privileges(
            "the_install_playbook_changes_once_then_nothing_and_writes_what_the_units_read",
        ) {
            return;
        }
        let installed = Command::new("dpkg-query")
            .args(["-W", "-f=${Status}", "hoptrace"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
            .unwrap();
        assert!(
            !installed,
            "a hoptrace package is installed on this host: not replacing it"
        );
        let etc = Path::new("/etc/hoptrace");
        assert!(
            !etc.join("station.scd").exists(),
            "/etc/hoptrace/station.scd exists: not replacing it"
        );
        let instance = format!("ansible{}", std::process::id());
        let _cleanup = Cleanup {
            instance: instance.clone(),
            made_etc: !etc.exists(),
        };

        let dir = tempfile::tempdir().unwrap();
        let inventory = dir.path().join("inventory");
        std::fs::write(
            &inventory,
            "localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n",
        )
        .unwrap();
        let scl = root().join("crates/scl/tests/fixtures/station.scd");
        let vars = serde_json::json!({
            "hoptrace_hosts": "localhost",
            "hoptrace_package_file": deb_package(),
            "hoptrace_scl_file": scl,
            "hoptrace_scl_ieds": ["MU01"],
            "hoptrace_manage_services": false,
            "hoptrace_subscribers": [{"name": instance, "iface": "lo", "metrics_port": 19464, "cpu": 1, "threshold": "250us", "on_threshold": ["pcap:5"]}],
            "hoptrace_tracers": [{"name": instance, "ifaces": ["lo"], "thresholds": ["250us", "1ms"], "metrics_port": 19465}],
        });
        let vars_file = dir.path().join("vars.json");
        std::fs::write(&vars_file, vars.to_string()).unwrap();
        let play = || {
            stdout_of(
                Command::new("ansible-playbook")
                    .arg("-i")
                    .arg(&inventory)
                    .arg("-e")
                    .arg(format!("@{}", vars_file.display()))
                    .arg(ansible_dir().join("playbooks/hoptrace.yml"))
                    .env("ANSIBLE_ROLES_PATH", ansible_dir().join("roles"))
                    .env("ANSIBLE_NOCOLOR", "1"),
            )
        };
        let first = play();
        assert!(changed(&first) > 0, "{first}");
        let second = play();
        assert_eq!(
            changed(&second),
            0,
            "the second run changed something:\n{second}"
        );

        let version = stdout_of(Command::new("/usr/bin/hoptrace").arg("--version"));
        assert!(version.starts_with("hoptrace "), "{version}");
        let sub = std::fs::read_to_string(etc.join(format!("subscribe-{instance}.toml"))).unwrap();
        for line in [
            "iface = \"lo\"",
            &format!("record = \"/var/lib/hoptrace/{instance}\""),
            "retain = \"7d\"",
            "max_disk = \"20GiB\"",
            "metrics = \"0.0.0.0:19464\"",
            "file = \"station.scd\"",
            "ied = [\"MU01\"]",
            "threshold = \"250us\"",
            "on_threshold = [\"pcap:5\"]",
        ] {
            assert!(sub.lines().any(|l| l == line), "{line} not in:\n{sub}");
        }
        assert!(etc.join("station.scd").exists());
        let env = std::fs::read_to_string(etc.join(format!("trace-{instance}.env"))).unwrap();
        assert!(
            env.lines().any(|l| l.trim_end()
                == "HOPTRACE_TRACE_ARGS=--iface lo --threshold 250us 1ms --metrics 0.0.0.0:19465"),
            "{env}"
        );
        let out = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(format!("hoptrace-trace@{instance}.service"))
            .arg(format!("hoptrace-subscribe@{instance}.service"))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && said.trim().is_empty(), "{said}");
    }
}
