//! The integration tests of `crates/cli`: one test binary, a module per
//! subject. Tests that need root (network namespaces, AF_PACKET, BPF)
//! live under `privileged::` (a `privileged` module of their file, or
//! the `privileged/` folder): `scripts/test.sh` runs them one at a time,
//! after every other test ran in parallel.

mod analysis_common;
mod ansible_role;
mod archive_cli;
mod capture_common;
mod compare_cli;
mod deploy_units;
mod docs_queries;
mod docs_run;
mod doctor_cli;
mod endpoints_common;
mod exit_codes_cli;
mod goose_cli;
mod goose_record;
mod goose_scl;
mod lab_common;
mod metrics_common;
mod outputs_cli;
mod packaging;
mod portable_binary;
mod readme_tour;
mod report_cli;
mod report_partial;
mod round_trip_cli;
mod smp_cnt_wrap;
mod sv_scl;
mod sv_scl_streams;
mod sv_tshark;
mod trace_cli;
mod units_cli;
mod workspace_rules;
mod privileged {
    mod campaign;
    mod correlate;
    mod disk_full;
    mod doctor_observe;
    mod endpoints_pacing;
    mod endpoints_ping;
    mod endpoints_rx;
    mod endpoints_sv;
    mod endpoints_xdp;
    mod explain_cli;
    mod explain_publisher;
    mod explain_subscriber;
    mod goose_record;
    mod goose_wire;
    mod join_vm;
    mod kvm_cli;
    mod kvm_nested;
    mod lab_output;
    mod lab_relay;
    mod lab_topologies;
    mod lab_vm;
    mod metrics_sv;
    mod metrics_trace;
    mod on_threshold_sv;
    mod relay_wire;
    mod round_trip;
    mod soak_retention;
    mod sv_dump_live;
    mod vm_libvirt;
    mod vm_qemu;
}
