//! The integration tests of `crates/vm`: one test binary, a module per
//! subject. Tests that need root (a libvirtd, a bridge, a QEMU guest)
//! live under `privileged::`.

mod domain_xml;
