//! Two build facts the crate needs:
//! - `jail --version`'s commit, target and features (JAIL_LONG_VERSION);
//! - the tests that need what a new machine may lack (the real agent CLIs, a container engine)
//!   compiled as ignored unless the run asks for them, so the test runner counts them as skipped
//!   instead of passed. `.ci/run` sets JAIL_TEST_AGENTS and JAIL_TEST_ENGINE to `required`.

use std::path::Path;
use std::process::Command;

fn main() {
    for (var, cfg) in [
        ("JAIL_TEST_AGENTS", "jail_test_agents"),
        ("JAIL_TEST_ENGINE", "jail_test_engine"),
    ] {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        println!("cargo::rerun-if-env-changed={var}");
        if std::env::var_os(var).is_some_and(|v| !v.is_empty()) {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
    println!("cargo::rustc-env=JAIL_LONG_VERSION={}", long_version());
}

/// "0.1.0 (commit 0123456789ab, x86_64-unknown-linux-gnu, features: test-hooks)". The commit
/// is git's where there is a checkout (none in a container build's context: "commit unknown").
fn long_version() -> String {
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let target = std::env::var("TARGET").unwrap_or_default();
    let commit = commit().unwrap_or_else(|| "unknown".into());
    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| {
            k.strip_prefix("CARGO_FEATURE_")
                .map(|f| f.to_lowercase().replace('_', "-"))
        })
        .collect();
    features.sort();
    let features = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(", ")
    };
    format!("{version} (commit {commit}, {target}, features: {features})")
}

fn commit() -> Option<String> {
    let dir = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(&dir)
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    // Rebuilt when HEAD moves: HEAD itself (a checkout) and the ref it names (a commit).
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let head = Path::new(&git_dir).join("HEAD");
        if head.exists() {
            println!("cargo::rerun-if-changed={}", head.display());
        }
        if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
            let r = Path::new(&git_dir).join(reference);
            if r.exists() {
                println!("cargo::rerun-if-changed={}", r.display());
            }
        }
    }
    Some(commit)
}
