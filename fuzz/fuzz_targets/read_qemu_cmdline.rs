//! Fuzz the QEMU command line reader on arbitrary bytes, split on NUL as
//! `/proc/PID/cmdline` is (another user's process, whatever it was started
//! with): it must give a model, and the domain settings read from its
//! options (`doctor --vm`), never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let argv: Vec<String> = data
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let c = hoptrace_vm::qemu_cmdline::parse(&argv);
    for n in &c.nics {
        let _ = (&n.ifname, &n.model, &n.mac);
    }
    for q in &c.qmp_sockets {
        let _ = q.display().to_string();
    }
    let _ = c.first_accel();
    let mut d = hoptrace_vm::domain::Domain::default();
    hoptrace_vm::qemu_domain::apply_settings(&mut d, &c.options);
    let _ = d.rt_vcpus();
});
