//! Thin entry point: parse, dispatch and map errors to exit codes (all in the library).

fn main() {
    std::process::exit(jail::run_cli());
}
