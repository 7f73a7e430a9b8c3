//! What is checked after a run, outside the jail: what the command planted in the writable
//! trees, moving it aside, and naming the protected file a command tried to replace.

pub mod planted;
pub mod protected_writes;
pub mod quarantine;
