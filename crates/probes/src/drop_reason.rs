//! Kernel drop reason names.
//!
//! `skb:kfree_skb` reports a numeric `enum skb_drop_reason`. The numbering
//! changes between kernels, so the names are read once from the running
//! kernel's BTF (the enum's members are exactly the `SKB_DROP_REASON_*`
//! names) instead of a table compiled in.

use std::collections::HashMap;

#[derive(Debug, Clone, Default)]
pub struct DropReasons {
    names: HashMap<u32, String>,
}

impl DropReasons {
    /// Read `enum skb_drop_reason` from the vmlinux BTF (empty on failure:
    /// names then print as `SKB_DROP_REASON_<number>`).
    pub fn from_kernel() -> Self {
        let mut names = HashMap::new();
        if let Ok(btf) = libbpf_rs::btf::Btf::from_vmlinux() {
            if let Some(e) = btf.type_by_name::<libbpf_rs::btf::types::Enum<'_>>("skb_drop_reason")
            {
                for m in e.iter() {
                    if let Some(n) = m.name {
                        names.insert(m.value as u32, n.to_string_lossy().into_owned());
                    }
                }
            }
        }
        DropReasons { names }
    }

    pub fn from_pairs(pairs: &[(u32, &str)]) -> Self {
        DropReasons {
            names: pairs.iter().map(|(v, n)| (*v, n.to_string())).collect(),
        }
    }

    /// Every (value, name), by value.
    pub fn pairs(&self) -> Vec<(u32, &str)> {
        let mut v: Vec<(u32, &str)> = self.names.iter().map(|(k, n)| (*k, n.as_str())).collect();
        v.sort_unstable();
        v
    }

    pub fn name(&self, reason: u32) -> String {
        self.names
            .get(&reason)
            .cloned()
            .unwrap_or_else(|| format!("SKB_DROP_REASON_{reason}"))
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}
