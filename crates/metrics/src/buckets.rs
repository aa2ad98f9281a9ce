//! Classic histogram buckets for latencies, in seconds (Prometheus' base
//! unit). They bracket the gates relay engineers quote (100 us, 250 us,
//! 500 us, 1 ms; IEC 61850-5 transfer times 3 ms and 10 ms) and reach far
//! enough to show a scheduler stall (100 ms, 1 s) as such.

/// Upper bounds (`le`), seconds; `+Inf` is added by the encoder.
pub const LATENCY_SECONDS: [f64; 16] = [
    10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2e-3, 3e-3, 5e-3, 10e-3, 20e-3, 50e-3,
    100e-3, 250e-3, 1.0,
];

#[cfg(test)]
mod tests {
    #[test]
    fn the_buckets_rise_and_hold_every_gate() {
        let b = super::LATENCY_SECONDS;
        assert!(b.windows(2).all(|w| w[0] < w[1]));
        for gate in [100e-6, 250e-6, 500e-6, 1e-3, 3e-3, 10e-3] {
            assert!(b.contains(&gate), "{gate}");
        }
    }
}
