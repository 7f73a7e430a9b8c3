//! The Linux enforcement layers, one module each. Each exposes `compile` (pure, unit-tested) and
//! `apply` (the only place with syscalls).

pub mod audit;
pub mod bpf_tree;
pub mod changes;
pub mod cow_run;
pub mod ended_by;
pub mod events;
pub mod evidence;
pub mod forward;
pub mod journal;
pub mod landlock;
pub mod launch;
pub mod layer_bound;
pub mod limits;
pub mod listen_check;
pub mod mountinfo;
pub mod mounts;
pub mod net_setup;
pub mod plan;
pub mod planted;
pub mod privileges;
pub mod protected_writes;
pub mod quarantine;
pub mod recorder;
pub mod rights;
pub mod run_state;
pub mod seccomp;
pub mod supervisor;
pub mod sys;
pub mod unix_connect;
pub mod unix_diag;
pub mod view;
