//! The kernel command line (`/proc/cmdline`) as the kernel reads it:
//! whitespace-separated `key` or `key=value` words, double quotes keep
//! spaces in a value, everything after a bare `--` belongs to init, and the
//! last occurrence of a key wins.

/// Parsed kernel parameters, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cmdline {
    pub raw: String,
    params: Vec<(String, Option<String>)>,
}

impl Cmdline {
    pub fn parse(raw: &str) -> Cmdline {
        let raw = raw.trim();
        let mut params = Vec::new();
        for word in split_words(raw) {
            if word == "--" {
                break;
            }
            match word.split_once('=') {
                Some((k, v)) => params.push((k.to_string(), Some(v.trim_matches('"').to_string()))),
                None => params.push((word.clone(), None)),
            }
        }
        Cmdline {
            raw: raw.to_string(),
            params,
        }
    }

    /// Value of the last `key=value` (`Some("")` for `key=`).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|(k, v)| k == key && v.is_some())
            .and_then(|(_, v)| v.as_deref())
    }

    /// `key` present, bare or with a value.
    pub fn has(&self, key: &str) -> bool {
        self.params.iter().any(|(k, _)| k == key)
    }

    /// `key=value` as written (for the report), or `key` when bare.
    pub fn show(&self, key: &str) -> Option<String> {
        match self.get(key) {
            Some(v) => Some(format!("{key}={v}")),
            None => self.has(key).then(|| key.to_string()),
        }
    }
}

fn split_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in s.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_occurrence_wins_and_init_arguments_are_ignored() {
        let c = Cmdline::parse(
            "BOOT_IMAGE=/vmlinuz isolcpus=1 quiet isolcpus=managed_irq,domain,2-3 -- nohz_full=1",
        );
        assert_eq!(c.get("isolcpus"), Some("managed_irq,domain,2-3"));
        assert!(c.has("quiet") && c.get("quiet").is_none());
        assert_eq!(c.get("nohz_full"), None);
        assert_eq!(c.show("quiet").as_deref(), Some("quiet"));
    }

    #[test]
    fn quoted_values_keep_their_spaces() {
        let c = Cmdline::parse("dyndbg=\"file a.c +p\" skew_tick=1");
        assert_eq!(c.get("dyndbg"), Some("file a.c +p"));
        assert_eq!(c.get("skew_tick"), Some("1"));
    }
}
