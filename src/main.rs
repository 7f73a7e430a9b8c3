//! Thin entry point: parse, dispatch and map errors to exit codes (all in the library).

fn main() {
    // Rust starts with SIGPIPE ignored; an ignored signal stays ignored across execve, so the
    // command (`yes | head`) would see EPIPE instead of dying as it should, and so would jail's
    // own output to a closed pipe. Restore the default.
    // SAFETY: setting a signal disposition to SIG_DFL before any thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    std::process::exit(jail::run_cli());
}
