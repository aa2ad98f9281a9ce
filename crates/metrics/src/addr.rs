//! The `--metrics` address: `PORT` alone means loopback (`127.0.0.1:PORT`);
//! `HOST:PORT` or `[V6]:PORT` listens where told (`0.0.0.0:9464` to let a
//! Prometheus on another host scrape it).

use std::net::{Ipv4Addr, SocketAddr};

/// The address `--metrics VALUE` listens on.
pub fn parse_listen(value: &str) -> Result<SocketAddr, String> {
    let v = value.trim();
    if let Ok(port) = v.parse::<u16>() {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    v.parse::<SocketAddr>().map_err(|_| {
        format!(
            "--metrics `{value}`: expected PORT (loopback), HOST:PORT or [IPv6]:PORT, e.g. 9464 or 127.0.0.1:9464"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_listens_on_loopback_and_an_address_where_told() {
        assert_eq!(
            parse_listen("9464").unwrap(),
            "127.0.0.1:9464".parse().unwrap()
        );
        assert_eq!(
            parse_listen("0.0.0.0:9100").unwrap(),
            "0.0.0.0:9100".parse().unwrap()
        );
        assert_eq!(
            parse_listen("[::1]:9464").unwrap(),
            "[::1]:9464".parse().unwrap()
        );
        let e = parse_listen("localhost:x").unwrap_err();
        assert!(e.contains("expected PORT"), "{e}");
        assert!(parse_listen("70000").is_err());
    }
}
