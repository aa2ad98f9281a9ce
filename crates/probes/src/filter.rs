//! The minimal `--filter` language of `hoptrace trace`: `ether proto N`,
//! `ether dst MAC`, joined with `and`, parsed into the [`OtherFilter`] that
//! the BPF programs apply to frames other than SV and ping.

use anyhow::{bail, Context, Result};

use crate::loader::OtherFilter;

/// Parse the minimal `--filter` language: `ether proto N`, `ether dst MAC`,
/// joined with `and`.
pub fn parse_filter(expr: &str) -> Result<OtherFilter> {
    let mut f = OtherFilter::default();
    let words: Vec<&str> = expr.split_whitespace().collect();
    let mut i = 0;
    while i < words.len() {
        match (words.get(i), words.get(i + 1), words.get(i + 2)) {
            (Some(&"and"), _, _) => i += 1,
            (Some(&"ether"), Some(&"proto"), Some(v)) => {
                let v = v.trim_start_matches("0x");
                f.ethertype = Some(u16::from_str_radix(v, 16).with_context(|| format!("bad ethertype `{v}` in --filter (hex, e.g. 0x88ba)"))?);
                i += 3;
            }
            (Some(&"ether"), Some(&"dst"), Some(v)) => {
                let parts: Vec<u8> = v.split(':').filter_map(|p| u8::from_str_radix(p, 16).ok()).collect();
                if parts.len() != 6 {
                    bail!("bad MAC `{v}` in --filter (use aa:bb:cc:dd:ee:ff)");
                }
                let mut m = [0u8; 6];
                m.copy_from_slice(&parts);
                f.dst_mac = Some(m);
                i += 3;
            }
            _ => bail!(
                "unsupported --filter `{expr}` at `{}`: supported: `ether proto 0xNNNN`, `ether dst MAC`, joined with `and` (interfaces: --iface, namespaces: --netns)",
                words[i..].join(" ")
            ),
        }
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_language() {
        let f = parse_filter("ether proto 0x0800 and ether dst 01:0c:cd:04:00:01").unwrap();
        assert_eq!(f.ethertype, Some(0x0800));
        assert_eq!(f.dst_mac, Some([1, 0x0c, 0xcd, 4, 0, 1]));
        assert!(parse_filter("tcp port 80").is_err());
        assert!(parse_filter("ether dst 01:02").is_err());
    }
}
