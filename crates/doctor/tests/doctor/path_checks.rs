//! The path checks on the fixture's VM: eth0 (a PCI NIC, IRQ 40 on CPU 1,
//! threaded as irq/40-eth0-rx-0 at FIFO 50), ksoftirqd/1 at FIFO 10, a QEMU
//! holding tap0 (found through /proc/100/fdinfo) with vhost-100 at FIFO 5
//! on CPU 1 and two vCPUs at FIFO 1 on CPUs 2 and 3, and another VM on
//! CPU 0. Each test changes one thing and looks at the verdict.

use crate::fixture;

use fixture::*;
use hoptrace_doctor::{catalogue, Scope, Status};

const PATH: &[&str] = &["eth0", "tap0"];

#[test]
fn the_path_is_discovered_from_the_interfaces_and_every_path_check_passes_when_tuned() {
    let f = Fixture::rt_host();
    let r = f.report(PATH);
    assert_eq!(
        r.checks.len(),
        catalogue()
            .iter()
            .filter(|c| matches!(c.scope, Scope::Host | Scope::Path))
            .count(),
        "with --iface every host and path check runs (domain checks need a domain, the observed one --observe)"
    );
    assert_eq!(r.summary.scope, "host + path: iface eth0 tap0");
    for c in r.checks.iter().filter(|c| c.scope == Scope::Path) {
        let want = if c.id == "path.consumer" {
            Status::NotApplicable
        } else {
            Status::Pass
        };
        assert_status(c, want);
    }
    let order = r
        .checks
        .iter()
        .find(|c| c.id == "path.priority_order")
        .unwrap();
    for who in [
        "NIC IRQ thread `irq/40-eth0-rx-0`",
        "ksoftirqd `ksoftirqd/1`",
        "vhost worker `vhost-100`",
        "vCPU `CPU 0/KVM`",
        "vCPU `CPU 1/KVM`",
    ] {
        assert!(
            order.details.iter().any(|d| d.starts_with(who)),
            "{who} missing: {order:#?}"
        );
    }
    // the other VM's vCPU is not on the path
    assert!(
        !order.details.iter().any(|d| d.contains("tid 201")),
        "{order:#?}"
    );
}

#[test]
fn a_vcpu_above_the_vhost_thread_that_feeds_it_on_a_shared_cpu_is_an_inversion() {
    let f = Fixture::rt_host();
    f.task(100, 101, "CPU 0/KVM", false, "1-2", 50, FIFO);
    let r = f.check_with("path.priority_order", PATH);
    assert_status(&r, Status::Fail);
    assert!(
        r.details.iter().any(|d| d.contains("vCPU `CPU 0/KVM` (FIFO 50) above the vhost worker `vhost-100` (FIFO 5) that feeds it, both allowed on CPU 1")),
        "{r:#?}"
    );
}

#[test]
fn an_inversion_on_disjoint_cpus_is_a_warning() {
    let f = Fixture::rt_host();
    f.task(100, 101, "CPU 0/KVM", false, "2", 50, FIFO);
    let r = f.check_with("path.priority_order", PATH);
    assert_status(&r, Status::Warn);
    assert!(
        r.details.iter().any(|d| d.contains("on other CPUs")),
        "{r:#?}"
    );
}

#[test]
fn an_irq_thread_below_the_consumer_on_the_same_cpu_is_an_inversion() {
    let f = Fixture::rt_host();
    f.task(50, 50, "irq/40-eth0-rx-0", true, "1", 1, FIFO);
    let r = f.check_with("path.priority_order", PATH);
    assert_status(&r, Status::Fail);
    assert!(
        r.details
            .iter()
            .any(|d| d.contains("above the NIC IRQ thread `irq/40-eth0-rx-0` (FIFO 1)")),
        "{r:#?}"
    );
}

#[test]
fn vcpus_unpinned_shared_or_not_real_time_are_reported() {
    let f = Fixture::rt_host();
    f.task(100, 101, "CPU 0/KVM", false, "0-3", 1, FIFO);
    assert_status(&f.check_with("path.vcpus", PATH), Status::Fail);
    let f = Fixture::rt_host();
    f.task(100, 102, "CPU 1/KVM", false, "2", 1, FIFO);
    let r = f.check_with("path.vcpus", PATH);
    assert_status(&r, Status::Fail);
    assert!(r.found.contains("shares CPU 2 with another vCPU"), "{r:#?}");
    let f = Fixture::rt_host();
    f.task(100, 101, "CPU 0/KVM", false, "1", 0, OTHER);
    let r = f.check_with("path.vcpus", PATH);
    assert_status(&r, Status::Warn);
    assert!(
        r.found.contains("not an RT CPU") && r.found.contains("runs OTHER"),
        "{r:#?}"
    );
}

#[test]
fn another_vm_allowed_on_the_path_cpus_fails_shared_cpus() {
    let f = Fixture::rt_host();
    f.task(200, 201, "CPU 0/KVM", false, "0-3", 1, FIFO);
    let r = f.check_with("path.shared_cpus", PATH);
    assert_status(&r, Status::Fail);
    assert!(
        r.details[0].starts_with("pid 200 `CPU 0/KVM` allowed on 0-3"),
        "{r:#?}"
    );
}

#[test]
fn nic_irqs_on_a_vcpu_cpu_or_moving_between_cpus_are_reported() {
    let f = Fixture::rt_host();
    f.write("/proc/irq/40/effective_affinity_list", "2\n");
    assert_status(&f.check_with("path.nic_irqs", PATH), Status::Fail);
    let f = Fixture::rt_host();
    f.write("/proc/irq/40/effective_affinity_list", "0-1\n");
    assert_status(&f.check_with("path.nic_irqs", PATH), Status::Warn);
}

#[test]
fn the_paths_own_irq_on_an_rt_cpu_is_a_warning_not_a_host_failure() {
    let f = Fixture::rt_host();
    f.write("/proc/irq/40/effective_affinity_list", "3\n");
    assert_status(&f.check("irq.effective_affinity"), Status::Fail);
    let r = f.check_with("irq.effective_affinity", PATH);
    assert_status(&r, Status::Warn);
    assert!(r.details[0].ends_with("on the traced path"), "{r:#?}");
}

#[test]
fn unthreaded_or_non_realtime_irq_handlers_and_starved_ksoftirqd_are_reported() {
    let f = Fixture::rt_host();
    f.remove("/proc/50");
    let r = f.check_with("path.irq_threads", PATH);
    assert_status(&r, Status::Warn);
    assert!(r.found.contains("hard-IRQ context"), "{r:#?}");
    let f = Fixture::rt_host();
    f.task(50, 50, "irq/40-eth0-rx-0", true, "1", 0, OTHER);
    assert_status(&f.check_with("path.irq_threads", PATH), Status::Fail);
    let f = Fixture::rt_host();
    f.task(51, 51, "ksoftirqd/1", true, "1", 0, OTHER);
    let r = f.check_with("path.ksoftirqd", PATH);
    assert_status(&r, Status::Warn);
    assert!(
        r.found.contains("softirq work deferred to it waits"),
        "{r:#?}"
    );
}

#[test]
fn vhost_and_consumer_threads_unpinned_or_not_real_time_are_reported() {
    let f = Fixture::rt_host();
    f.task(100, 103, "vhost-100", false, "0-3", 0, OTHER);
    assert_status(&f.check_with("path.vhost", PATH), Status::Fail);
    // Without vhost, QEMU's main thread reads the tap itself.
    let f = Fixture::rt_host();
    f.remove("/proc/100/task/103");
    assert_status(&f.check_with("path.vhost", PATH), Status::NotApplicable);
    let r = f.check_with("path.consumer", PATH);
    assert_status(&r, Status::Warn);
    assert!(
        r.details
            .iter()
            .any(|d| d.starts_with("tap reader `qemu-system-x86`")),
        "{r:#?}"
    );
}

#[test]
fn a_nic_on_another_numa_node_than_the_vm_fails_numa() {
    let f = Fixture::rt_host();
    f.write("/sys/devices/system/node/node0/cpulist", "0-1\n")
        .write("/sys/devices/system/node/node1/cpulist", "2-3\n");
    let r = f.check_with("path.numa", PATH);
    assert_status(&r, Status::Fail);
    assert!(
        r.details
            .iter()
            .any(|d| d.contains("`CPU 0/KVM` may run on CPUs 2")),
        "{r:#?}"
    );
    f.remove("/sys/devices/system/node");
    assert_status(&f.check_with("path.numa", PATH), Status::Unknown);
}

#[test]
fn software_devices_have_no_interrupt_to_check() {
    let f = Fixture::rt_host();
    let r = f.report(&["tap0"]);
    let get = |id: &str| r.checks.iter().find(|c| c.id == id).unwrap().clone();
    for id in [
        "path.nic_irqs",
        "path.irq_threads",
        "path.ksoftirqd",
        "path.numa",
    ] {
        assert_status(&get(id), Status::NotApplicable);
    }
    // the QEMU holding tap0 is still found
    assert_status(&get("path.vcpus"), Status::Pass);
}

#[test]
fn unreadable_thread_policies_make_the_order_unknown_not_pass() {
    let f = Fixture::rt_host();
    f.remove("/proc/100/task/101/stat")
        .remove("/proc/100/task/102/stat");
    let r = f.check_with("path.priority_order", PATH);
    assert_status(&r, Status::Unknown);
}

#[test]
fn a_missing_interface_or_process_is_refused_with_what_to_do() {
    let f = Fixture::rt_host();
    let kernel = FakeKernel::new(&f);
    let opts = hoptrace_doctor::Options {
        ifaces: vec!["eth9".into()],
        ..Default::default()
    };
    let e = hoptrace_doctor::run(&f.root(), &kernel, &opts)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("--iface eth9: no interface `eth9`") && e.contains("check the name"),
        "{e}"
    );
    let opts = hoptrace_doctor::Options {
        pids: vec![4242],
        ..Default::default()
    };
    let e = hoptrace_doctor::run(&f.root(), &kernel, &opts)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("--pid 4242: no such process"), "{e}");
    let opts = hoptrace_doctor::Options {
        netns: Some("x".into()),
        ifaces: vec!["eth0".into()],
        ..Default::default()
    };
    let e = hoptrace_doctor::run(&f.root(), &kernel, &opts)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--netns needs the live host"), "{e}");
}

#[test]
fn a_qemu_without_thread_names_makes_the_vcpus_unknown_and_says_how_to_name_them() {
    let f = Fixture::rt_host();
    f.task(100, 101, "qemu-system-x86", false, "2", 1, FIFO)
        .task(100, 102, "qemu-system-x86", false, "3", 1, FIFO)
        .remove("/proc/100/task/103");
    let r = f.check_with("path.vcpus", PATH);
    assert_status(&r, Status::Unknown);
    assert!(r.found.contains("-name <vm>,debug-threads=on"), "{r:#?}");
    let c = f.check_with("path.consumer", PATH);
    assert!(
        c.details
            .iter()
            .any(|d| d.starts_with("tap reader `qemu-system-x86` (tid 100")),
        "{c:#?}"
    );
}
