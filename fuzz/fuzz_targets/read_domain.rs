//! Fuzz the libvirt domain XML reader on arbitrary bytes (a domain XML is
//! untrusted input: a template from elsewhere, `virsh dumpxml` of a host
//! someone else configured): it must return a domain or an error, never
//! panic. Errors point inside the input; a domain's CPU sets are not empty
//! and print back in libvirt's syntax that reads to the same set.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let lines = data.iter().filter(|b| **b == b'\n').count() as u32 + 1;
    match hoptrace_vm::parse(data) {
        Ok(d) => {
            let sets = d
                .cputune
                .vcpupin
                .iter()
                .chain(&d.cputune.iothreadpin)
                .map(|p| &p.cpus)
                .chain(d.cputune.emulatorpin.as_ref())
                .chain(d.vcpu_cpuset.as_ref());
            for s in sets {
                assert!(!s.is_empty());
                assert_eq!(&hoptrace_vm::Cpus::parse(&s.to_string()).unwrap(), s);
            }
            let _ = d.rt_vcpus();
        }
        Err(hoptrace_vm::DomainError::NotXml { line, .. })
        | Err(hoptrace_vm::DomainError::Invalid { line, .. }) => {
            assert!(line >= 1 && line <= lines, "line {line} of {lines}");
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
