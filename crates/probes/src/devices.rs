//! Network devices by (netns inode, ifindex).
//!
//! Events carry the device's ifindex and its namespace's inode number. This
//! table turns them into names and tells taps (tun/tap, macvtap) from other
//! devices, which the hop predicates need. It is built from
//! `ip [-n NS] -d -j link show` for the initial namespace and every named
//! namespace (`ip netns list`), and refreshed when an unknown device appears.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::process::Command;

use anyhow::{bail, Context, Result};
use hoptrace_os::{InterfaceError, Namespace};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    pub kind: String,
    pub is_tap: bool,
    pub netns_name: Option<String>,
}

/// Inode of a namespace: `None` for the current one, else a named one.
pub fn netns_inode(name: Option<&str>) -> Result<u32> {
    let path = match name {
        None => "/proc/self/ns/net".to_string(),
        Some(n) => format!("/var/run/netns/{n}"),
    };
    let md = std::fs::metadata(&path)
        .with_context(|| format!("network namespace {path} not found (see `ip netns list`)"))?;
    Ok(md.ino() as u32)
}

fn links(ns: Option<&str>) -> Result<Vec<(u32, DeviceInfo)>> {
    let mut cmd = Command::new("ip");
    if let Some(n) = ns {
        cmd.args(["-n", n]);
    }
    let out = cmd
        .args(["-d", "-j", "link", "show"])
        .output()
        .context("running `ip -d -j link show` (iproute2 needed)")?;
    if !out.status.success() {
        bail!(
            "ip link show failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("parsing ip -j output")?;
    let mut res = Vec::new();
    for l in v.as_array().into_iter().flatten() {
        let (Some(idx), Some(name)) = (l["ifindex"].as_u64(), l["ifname"].as_str()) else {
            continue;
        };
        let kind = l["linkinfo"]["info_kind"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let is_tap = matches!(kind.as_str(), "tun" | "macvtap" | "ipvtap");
        res.push((
            idx as u32,
            DeviceInfo {
                name: name.to_string(),
                kind,
                is_tap,
                netns_name: ns.map(str::to_string),
            },
        ));
    }
    Ok(res)
}

/// All devices of the current and the named namespaces.
#[derive(Debug, Default, Clone)]
pub struct DeviceTable {
    by_key: HashMap<(u32, u32), DeviceInfo>,
}

impl DeviceTable {
    pub fn scan() -> Result<Self> {
        let mut t = DeviceTable::default();
        t.refresh()?;
        Ok(t)
    }

    pub fn refresh(&mut self) -> Result<()> {
        let root = netns_inode(None)?;
        for (i, d) in links(None)? {
            self.by_key.insert((root, i), d);
        }
        let out = Command::new("ip").args(["netns", "list"]).output()?;
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Some(name) = line.split_whitespace().next() else {
                continue;
            };
            let (Ok(ino), Ok(ls)) = (netns_inode(Some(name)), links(Some(name))) else {
                continue;
            };
            for (i, d) in ls {
                self.by_key.insert((ino, i), d);
            }
        }
        Ok(())
    }

    pub fn insert(&mut self, netns: u32, ifindex: u32, info: DeviceInfo) {
        self.by_key.insert((netns, ifindex), info);
    }

    /// Every known device of the namespace with inode `ino`: (ifindex, info).
    pub fn devices_in(&self, ino: u32) -> Vec<(u32, &DeviceInfo)> {
        let mut v: Vec<(u32, &DeviceInfo)> = self
            .by_key
            .iter()
            .filter(|((n, _), _)| *n == ino)
            .map(|((_, i), d)| (*i, d))
            .collect();
        v.sort_by_key(|(i, _)| *i);
        v
    }

    /// Every device: (netns inode, ifindex, info), by namespace and index.
    pub fn entries(&self) -> Vec<(u32, u32, &DeviceInfo)> {
        let mut v: Vec<(u32, u32, &DeviceInfo)> =
            self.by_key.iter().map(|((n, i), d)| (*n, *i, d)).collect();
        v.sort_by_key(|(n, i, _)| (*n, *i));
        v
    }

    pub fn get(&self, netns: u32, ifindex: u32) -> Option<&DeviceInfo> {
        self.by_key.get(&(netns, ifindex))
    }

    /// ifindex of `name` in namespace `ns` (None = current), with the
    /// interface-lookup error of `hoptrace_os` (the namespace searched, the
    /// devices that exist there, what to do).
    pub fn resolve(&self, ns: Option<&str>, name: &str) -> Result<(u32, u32)> {
        let ino = netns_inode(ns)?;
        if let Some(((n, i), _)) = self
            .by_key
            .iter()
            .find(|((n, _), d)| *n == ino && d.name == name)
        {
            return Ok((*n, *i));
        }
        let existing = self
            .devices_in(ino)
            .into_iter()
            .map(|(_, d)| d.name.clone())
            .collect();
        Err(InterfaceError::NotFound {
            name: name.to_string(),
            namespace: ns.map_or_else(Namespace::current, |n| Namespace::Named(n.to_string())),
            existing,
        }
        .into())
    }
}
