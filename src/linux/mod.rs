//! Linux: the policy enforced by layers the kernel offers, in four folders by job.
//!
//! - [`layers`]: one module per enforcement layer, each `compile` (pure, unit-tested) and
//!   `apply` (the only place with syscalls).
//! - [`run`]: the run itself: the launch, the one pure plan, the supervisor and init, the
//!   journal of what is left to do after the command ends.
//! - [`after`]: what is checked once the command ended (what it planted, moved aside).
//! - [`observe`]: what is watched and told: the audit records, the event stream, the run
//!   report's facts, and `jail status`'s evidence.
//!
//! Only `platform` imports this module (tests/layout.rs).

pub mod after;
pub mod layers;
pub mod mountinfo;
pub mod observe;
pub mod run;
