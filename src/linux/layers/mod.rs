//! The enforcement layers, one module each. Each exposes `compile` (pure, unit-tested) and
//! `apply` (the only place with syscalls); the run ([`super::run`]) compiles and applies them.

pub mod bpf_tree;
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
