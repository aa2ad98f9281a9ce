//! Write a synthetic event dump (`hoptrace_trace::synth`): the records of
//! STREAMS SV streams x RATE frames/s for SECONDS through a bridge + tap
//! path, for `hoptrace trace --replay` (bench/trace_replay.sh uses it for
//! loads this host cannot publish).
//!
//! Usage: synth_dump OUT STREAMS RATE SECONDS

use std::io::BufWriter;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out, streams, rate, seconds] = args.as_slice() else {
        anyhow::bail!("usage: synth_dump OUT STREAMS RATE SECONDS");
    };
    let (streams, rate, seconds): (u32, u32, f64) =
        (streams.parse()?, rate.parse()?, seconds.parse()?);
    let s = hoptrace_trace::synth::Synthetic {
        prefix: "SYNTH".into(),
        streams,
        rate,
        frames: (f64::from(rate) * seconds) as u32,
    };
    let f = std::fs::File::create_new(out)?;
    let n = hoptrace_trace::synth::write_dump(&s, BufWriter::with_capacity(1 << 20, f))?;
    println!("{out}: {n} records ({streams} streams x {rate}/s for {seconds} s)");
    Ok(())
}
