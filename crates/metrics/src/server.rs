//! The HTTP endpoint: one thread that answers `GET /metrics` with the
//! registry in the OpenMetrics text format (which Prometheus scrapes
//! natively), `GET /` with a pointer to it, and anything else with 404.
//! The listening socket is bound in [`Exporter::start`], so a port in use
//! is an error before the measurement starts; dropping the exporter stops
//! the thread (within 200 ms) and closes the socket (tiny_http's accept
//! thread lets it go just after).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, Result};
use prometheus_client::encoding::text::encode;
/// The registry an [`Exporter`] serves (re-exported: its users name it
/// without depending on `prometheus-client`).
pub use prometheus_client::registry::Registry;

/// The content type of the OpenMetrics text exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A running `/metrics` endpoint.
pub struct Exporter {
    /// Where it listens (the port the kernel chose when asked for 0).
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Exporter {
    /// Listen on `addr` and serve `registry` until dropped.
    pub fn start(addr: SocketAddr, registry: Arc<Mutex<Registry>>) -> Result<Self> {
        let server = tiny_http::Server::http(addr).map_err(|e| {
            anyhow!(
                "--metrics {addr}: cannot listen: {e} (another exporter on that port? pick another, e.g. --metrics {})",
                addr.port().wrapping_add(1)
            )
        })?;
        let addr = server.server_addr().to_ip().unwrap_or(addr);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("metrics".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        match server.recv_timeout(Duration::from_millis(200)) {
                            Ok(Some(req)) => respond(req, &registry),
                            Ok(None) => {}
                            Err(_) => break,
                        }
                    }
                })?
        };
        Ok(Exporter {
            addr,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn header(name: &str, value: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("a valid header")
}

fn respond(req: tiny_http::Request, registry: &Mutex<Registry>) {
    let get = *req.method() == tiny_http::Method::Get;
    let path = req.url().split('?').next().unwrap_or("");
    let response = match (get, path) {
        (true, "/metrics") => {
            let mut body = String::new();
            let encoded = {
                let reg = registry.lock().unwrap_or_else(|e| e.into_inner());
                encode(&mut body, &reg)
            };
            match encoded {
                Ok(()) => tiny_http::Response::from_string(body)
                    .with_header(header("Content-Type", CONTENT_TYPE)),
                Err(_) => tiny_http::Response::from_string("encoding the metrics failed\n")
                    .with_status_code(500),
            }
        }
        (true, "/") => tiny_http::Response::from_string("hoptrace: metrics at /metrics\n"),
        _ => tiny_http::Response::from_string("not found: hoptrace serves GET /metrics\n")
            .with_status_code(404),
    };
    let _ = req.respond(response);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn metrics_are_served_on_loopback_and_other_paths_are_404() {
        let (m, reg) = crate::sv::SubscriberMetrics::new();
        m.malformed_frame();
        let ex =
            Exporter::start("127.0.0.1:0".parse().unwrap(), Arc::new(Mutex::new(reg))).unwrap();
        let page = get(ex.addr, "/metrics");
        assert!(
            page.starts_with("HTTP/1.0 200") || page.starts_with("HTTP/1.1 200"),
            "{page}"
        );
        assert!(page.contains(CONTENT_TYPE), "{page}");
        assert!(
            page.contains("hoptrace_sv_malformed_frames_total 1"),
            "{page}"
        );
        assert!(page.trim_end().ends_with("# EOF"), "{page}");
        assert!(get(ex.addr, "/nope").contains(" 404 "));
        // A second exporter on the same port is refused with a hint.
        let e = Exporter::start(ex.addr, Arc::new(Mutex::new(Registry::default())))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("cannot listen") && e.contains("pick another"),
            "{e}"
        );
        let addr = ex.addr;
        drop(ex);
        // tiny_http's accept thread lets the socket go just after.
        let closed = (0..40).any(|_| {
            std::thread::sleep(Duration::from_millis(50));
            TcpStream::connect(addr).is_err()
        });
        assert!(
            closed,
            "the port is still open 2 s after the exporter was dropped"
        );
    }
}
