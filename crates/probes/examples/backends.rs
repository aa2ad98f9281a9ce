//! Print which BPF backends load here (same as `hoptrace trace --list-backends`).
fn main() -> anyhow::Result<()> {
    print!("{}", hoptrace_probes::loader::describe_backends()?);
    Ok(())
}
