//! Generate a synthetic recording: `gen_recording DIR PACKETS [STREAMS] [HOPS]`.
use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 3 {
        anyhow::bail!("usage: gen_recording DIR PACKETS [STREAMS] [HOPS]");
    }
    let spec = hoptrace_analysis::synth::SynthSpec {
        packets: a[2].parse()?,
        streams: a.get(3).map_or(Ok(8), |s| s.parse())?,
        hops: a.get(4).map_or(Ok(4), |s| s.parse())?,
        rate: 4000,
        seed: 42,
    };
    let n =
        hoptrace_analysis::synth::write_synthetic(&PathBuf::from(&a[1]), &spec, |_, _, _| None)?;
    println!("wrote {n} rows to {}", a[1]);
    Ok(())
}
