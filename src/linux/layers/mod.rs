//! The enforcement layers, one module each. Each exposes `compile` (pure, unit-tested) and
//! `apply` (the only place with syscalls); the run ([`super::run`]) compiles and applies them.

pub mod bpf_tree;
pub mod exec_domain;
pub mod landlock;
pub mod layer_bound;
pub mod limits;
pub mod listen_check;
pub mod mounts;
pub mod net_setup;
pub mod privileges;
pub mod rights;
pub mod seccomp;
pub mod unix_connect;
pub mod unix_diag;

// What the rest of jail may use of the layers. The run (`super::run`) compiles and applies them
// whole; every other module sees only these (tests/layout.rs holds them to it), so a layer's
// plan and apply can change without reaching into what observes or checks the run.
pub use layer_bound::{Mounts, upper_of};
pub use limits::{
    Host as LimitsHost, LimitsPlan, compile as compile_limits, report as limits_report,
};
pub use net_setup::NetRuntime;
pub use privileges::fd_is_open;
pub use unix_connect::available as unix_mediation_available;
