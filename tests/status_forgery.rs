//! `jail status` inside a real jail run with `--allow-userns`, where the command forges the
//! policy (issue 34, item 3): a nested user and mount namespace of its own puts any file at
//! `/dev/jail/policy.json` (a read-only tmpfs, owned by the caller, in namespaces that are not
//! the initial ones: everything the policy file's own check looks at), drops its capabilities,
//! and runs the real `jail status`. Every other fact status asks (no_new_privs, jail's seccomp
//! filter, Landlock's signal scope, the read-only mounts) is the real jail's, so they all hold.
//!
//! Whatever the forged file claims, status must not say `confined` (exit 0): the claims it can
//! check (no network, the homes hidden) are checked by their effect and shown contradicted; the
//! view itself is one the process could have made, which makes it advisory at best. As root and
//! as an unprivileged user.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::{Fixture, Run, Who, full_level_or_skip, jail_bin, users};

/// A PATH every user can search.
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

fn json(text: &str, what: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: not JSON ({e}):\n{text}"))
}

/// The policy file a real jail run with `flags` shows its command.
fn real_policy(fx: &Fixture, flags: &[&str]) -> serde_json::Value {
    let mut args = flags.to_vec();
    args.extend(["--", "/bin/sh", "-c", "cat \"$JAIL_POLICY\""]);
    let run = fx.jail_with(&args, &[], &[("PATH", PATH)]);
    assert_eq!(run.code, Some(0), "{flags:?}\n{}", run.describe());
    json(&run.stdout, "policy file")
}

/// Strips what would give the forgery away to a status that believes the file: the hidden
/// paths (they are readable in the forger's view), and the gaps.
fn quiet(mut v: serde_json::Value) -> serde_json::Value {
    v["hidden"] = serde_json::json!([]);
    v["gaps"] = serde_json::json!([]);
    let rules: Vec<serde_json::Value> = v["policy"]["rules"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r["access"] != "hide")
        .collect();
    v["policy"]["rules"] = rules.into();
    v
}

/// Writes `policy` where the fixture's user can read it, mode 0444.
fn save(fx: &Fixture, name: &str, policy: &serde_json::Value) -> PathBuf {
    let path = fx.dir.join(name);
    std::fs::write(&path, policy.to_string()).unwrap();
    fx.give_to(fx.who);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    path
}

/// Run inside `unshare -Urm` in the jail: the forged file on a read-only tmpfs over
/// /dev/jail, every capability dropped, then the real `jail status --json`.
const FORGE: &str = r#"set -e
mount -t tmpfs -o size=1m,mode=755 tmpfs /dev/jail
cp "$1" /dev/jail/policy.json
chmod 444 /dev/jail/policy.json
mount -o remount,ro,bind /dev/jail
exec setpriv --inh-caps=-all --bounding-set=-all "$2" status --json
"#;

/// `jail --allow-userns --home visible extra -- unshare -Urm sh -c FORGE policy jail` as the fixture's user.
fn forged_status(fx: &Fixture, extra: &[&str], policy: &Path) -> (Run, serde_json::Value) {
    let jail = jail_bin().to_string_lossy().into_owned();
    let policy = policy.to_string_lossy().into_owned();
    // HOME readable in the real run (every profile hides it by default): the forged file's
    // "hidden" is then a lie the homes check must catch.
    let mut args = vec!["--allow-userns", "--home", "visible"];
    args.extend(extra);
    args.extend([
        "--", "unshare", "-Urm", "/bin/sh", "-c", FORGE, "sh", &policy, &jail,
    ]);
    let run = fx.jail_with(&args, &[], &[("PATH", PATH)]);
    assert!(
        !run.stderr.contains("unshare:") && !run.stderr.contains("mount:"),
        "the forgery could not be set up\n{}",
        run.describe()
    );
    let v = json(&run.stdout, &format!("status --json\n{}", run.describe()));
    (run, v)
}

/// The check called `name`: (finding, detail).
fn finding(v: &serde_json::Value, name: &str) -> Option<(String, String)> {
    let c = v["checks"].as_array()?.iter().find(|c| c["name"] == name)?;
    Some((
        c["finding"].as_str().unwrap_or_default().to_string(),
        c["detail"].as_str().unwrap_or_default().to_string(),
    ))
}

#[track_caller]
fn assert_not_confined(run: &Run, v: &serde_json::Value, what: &str) {
    assert_ne!(
        run.code,
        Some(0),
        "{what}: the forged policy was believed\n{v:#}"
    );
    assert_ne!(v["verdict"], "confined", "{what}: {v:#}");
}

#[track_caller]
fn assert_contradicted(v: &serde_json::Value, check: &str, needle: &str, what: &str) {
    let (found, detail) =
        finding(v, check).unwrap_or_else(|| panic!("{what}: no {check:?} check\n{v:#}"));
    assert!(
        found == "failed" && detail.contains(needle),
        "{what}: the {check:?} check did not contradict it ({found}: {detail})\n{v:#}"
    );
}

/// The host's network has an interface other than loopback (a machine without one has nothing
/// for a `net: none` claim to hide).
fn host_has_network() -> bool {
    std::fs::read_dir("/sys/class/net")
        .map(|d| d.flatten().any(|e| e.file_name() != "lo"))
        .unwrap_or(false)
}

/// The forged file says `net: none` (a real `--net none` policy), the jail runs on the host's
/// network.
#[test]
fn a_forged_net_claim_under_allow_userns_is_not_confirmed() {
    if !full_level_or_skip("status_forged_net") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "fgnet");
        let forged = quiet(real_policy(&fx, &["--allow-userns", "--net", "none"]));
        assert_eq!(forged["policy"]["net"]["mode"], "none");
        let path = save(&fx, "net.json", &forged);
        let what = format!("{who:?}: net none forged on the host's network");
        let (run, v) = forged_status(&fx, &[], &path);
        assert_not_confined(&run, &v, &what);
        if host_has_network() {
            assert_contradicted(&v, "network", "beyond loopback", &what);
        }
    }
}

/// The forged file says `home: hidden` (a real `--home hidden` policy, its hidden list left
/// out), the jail leaves HOME readable.
#[test]
fn a_forged_home_claim_under_allow_userns_is_not_confirmed() {
    if !full_level_or_skip("status_forged_home") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "fghome");
        let forged = quiet(real_policy(&fx, &["--allow-userns", "--home", "hidden"]));
        assert_eq!(forged["policy"]["home"], "hidden");
        let path = save(&fx, "home.json", &forged);
        let what = format!("{who:?}: home hidden forged with HOME readable");
        let (run, v) = forged_status(&fx, &[], &path);
        assert_not_confined(&run, &v, &what);
        let home = fx.home.to_string_lossy().into_owned();
        assert_contradicted(&v, "homes", &home, &what);
        // The text output says which claim is contradicted, and never "confined".
        let jail = jail_bin().to_string_lossy().into_owned();
        let policy = path.to_string_lossy().into_owned();
        let text_forge = FORGE.replace("status --json", "status");
        let args = [
            "--allow-userns",
            "--home",
            "visible",
            "--",
            "unshare",
            "-Urm",
            "/bin/sh",
            "-c",
            &text_forge,
            "sh",
            &policy,
            &jail,
        ];
        let run = fx.jail_with(&args, &[], &[("PATH", PATH)]);
        assert_ne!(run.code, Some(0), "{what}, text\n{}", run.describe());
        assert!(
            run.stdout.contains("homes contradicted:") && run.stdout.contains(&home),
            "{what}, text\n{}",
            run.describe()
        );
    }
}

/// A policy written whole by the forger: another profile, nothing writable, no network, the
/// homes hidden, user namespaces refused, no hidden path to check and no gap.
#[test]
fn a_policy_forged_wholesale_under_allow_userns_is_not_confirmed() {
    if !full_level_or_skip("status_forged_wholesale") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "fgwhole");
        for allow_userns in [true, false] {
            let mut forged = quiet(real_policy(&fx, &["--allow-userns"]));
            forged["profile"] = "review".into();
            forged["policy"]["profile"] = "review".into();
            forged["policy"]["net"] = serde_json::json!({"mode": "none"});
            forged["policy"]["home"] = "hidden".into();
            forged["policy"]["allow_userns"] = allow_userns.into();
            forged["writable"] = serde_json::json!([]);
            let path = save(&fx, &format!("whole-{allow_userns}.json"), &forged);
            let what = format!("{who:?}: a whole policy forged, allow_userns {allow_userns}");
            let (run, v) = forged_status(&fx, &[], &path);
            assert_not_confined(&run, &v, &what);
            assert!(
                v["policy"].is_null() || run.code == Some(2),
                "{what}: {v:#}"
            );
            let home = fx.home.to_string_lossy().into_owned();
            assert_contradicted(&v, "homes", &home, &what);
            if host_has_network() {
                assert_contradicted(&v, "network", "beyond loopback", &what);
            }
        }
    }
}

/// Run inside `unshare -Urm`: as [`FORGE`], with a seccomp filter of the forger's own refusing
/// new user namespaces (as jail's does without `--allow-userns`), so that status's own try fails.
const FORGE_FILTERED: &str = r#"set -e
mount -t tmpfs -o size=1m,mode=755 tmpfs /dev/jail
cp "$1" /dev/jail/policy.json
chmod 444 /dev/jail/policy.json
mount -o remount,ro,bind /dev/jail
exec setpriv --inh-caps=-all --bounding-set=-all "$3" nouserns - "$2" status --json
"#;

/// A forged plain policy (user namespaces refused) under a filter that refuses them: status's
/// try to create one fails as in a plain jail, but the pid and IPC namespaces jail made belong
/// to the user namespace above the forger's.
#[test]
fn a_user_namespace_below_jails_is_caught_when_a_filter_hides_that_more_can_be_made() {
    if !full_level_or_skip("status_forged_filtered") {
        return;
    }
    let forge = common::compile_helper("forge")
        .to_string_lossy()
        .into_owned();
    let jail = jail_bin().to_string_lossy().into_owned();
    for who in users() {
        let fx = Fixture::new(who, "fgfilter");
        let forged = quiet(real_policy(&fx, &[]));
        assert_eq!(forged["policy"]["allow_userns"], false);
        let path = save(&fx, "plain.json", &forged);
        let policy = path.to_string_lossy().into_owned();
        let args = [
            "--allow-userns",
            "--home",
            "visible",
            "--",
            "unshare",
            "-Urm",
            "/bin/sh",
            "-c",
            FORGE_FILTERED,
            "sh",
            &policy,
            &jail,
            &forge,
        ];
        let run = fx.jail_with(&args, &[], &[("PATH", PATH)]);
        let v = json(&run.stdout, &format!("status --json\n{}", run.describe()));
        let what = format!("{who:?}: a plain policy forged under a filter refusing userns");
        assert_not_confined(&run, &v, &what);
        assert_contradicted(
            &v,
            "namespaces",
            "a user namespace jail did not make",
            &what,
        );
    }
}

/// The real policy of an `--allow-userns` run, unforged: the process could have made its view
/// itself, so status is advisory (exit 2), naming why; the same status without the flag is
/// confirmed (exit 0).
#[test]
fn status_under_allow_userns_is_advisory_and_without_it_confirmed() {
    if !full_level_or_skip("status_allow_userns") {
        return;
    }
    let jail = jail_bin().to_string_lossy().into_owned();
    for who in users() {
        let fx = Fixture::new(who, "fguserns");
        let what = format!("{who:?}: --allow-userns, the real policy");
        let run = fx.jail_with(
            &["--allow-userns", "--", &jail, "status", "--json"],
            &[],
            &[("PATH", PATH)],
        );
        assert_eq!(run.code, Some(2), "{what}\n{}", run.describe());
        let v = json(&run.stdout, "status");
        assert_eq!(v["verdict"], "advisory", "{what}: {v:#}");
        let (found, detail) = finding(&v, "namespaces").expect("a namespaces check");
        assert!(
            found == "advisory" && detail.contains("can create user namespaces"),
            "{what}: {found}: {detail}"
        );
        for flags in [&[][..], &["--net", "none", "--home", "hidden"][..]] {
            let mut args = flags.to_vec();
            args.extend(["--", &jail, "status", "--json"]);
            let run = fx.jail_with(&args, &[], &[("PATH", PATH)]);
            let what = format!("{who:?}: {flags:?}");
            assert_eq!(run.code, Some(0), "{what}\n{}", run.describe());
            let v = json(&run.stdout, "status");
            let (found, detail) = finding(&v, "namespaces").expect("a namespaces check");
            assert_eq!(found, "verified", "{what}: {detail}");
            if !flags.is_empty() {
                for check in ["network", "homes"] {
                    let (found, detail) = finding(&v, check).expect("the check");
                    assert_eq!(found, "verified", "{what}: {check}: {detail}");
                }
            }
        }
    }
}

#[test]
fn the_forged_text_output_is_escaped() {
    // A forged profile name with terminal controls comes out escaped (the policy file is the
    // forger's words).
    if !full_level_or_skip("status_forged_escape") {
        return;
    }
    let who = if common::is_root() {
        Who::Root
    } else {
        Who::User
    };
    let fx = Fixture::new(who, "fgesc");
    let mut forged = quiet(real_policy(&fx, &["--allow-userns"]));
    forged["profile"] = "evil\u{1b}]0;pwned\u{7}".into();
    let path = save(&fx, "esc.json", &forged);
    let jail = jail_bin().to_string_lossy().into_owned();
    let policy = path.to_string_lossy().into_owned();
    let text_forge = FORGE.replace("status --json", "status");
    let args = [
        "--allow-userns",
        "--",
        "unshare",
        "-Urm",
        "/bin/sh",
        "-c",
        &text_forge,
        "sh",
        &policy,
        &jail,
    ];
    let run = fx.jail_with(&args, &[], &[("PATH", PATH)]);
    assert_ne!(run.code, Some(0), "{}", run.describe());
    assert!(!run.stdout.contains('\u{1b}'), "{}", run.describe());
}
