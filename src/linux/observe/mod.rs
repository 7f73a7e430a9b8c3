//! What is observed: Landlock's audit records, the live event stream, the facts of the run
//! report, and what `jail status` asks the kernel.

pub mod audit;
pub mod events;
pub mod evidence;
pub mod execs;
pub mod recorder;
pub mod view;
