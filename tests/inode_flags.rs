//! Inode flags of a read-only file, at the partial level too. Landlock (ABI 7) does not guard
//! FS_IOC_SETFLAGS (chattr), FS_IOC_FSSETXATTR or file_setattr(2); the mount view's read-only
//! binds refuse them with EROFS, and seccomp refuses them in every jail, so a run without the
//! mount view (Docker's default profile) keeps them too. As root and as an unprivileged user, on
//! a filesystem with flags (ext4 under /var/tmp, not tmpfs).

mod common;

use common::{Attack, Fixture, Layer, attack_bin, full_level_or_skip, users};

/// Whether the helper's `op` works on `path` outside any jail (the filesystem has flags, the
/// kernel has the call): otherwise the attack proves nothing here.
fn works_outside(fx: &Fixture, op: &str, path: &str) -> bool {
    let out = fx.command(attack_bin(), &[op, path]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).starts_with("ALLOWED")
}

fn lsattr(path: &str) -> String {
    let out = std::process::Command::new("lsattr")
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "lsattr {path}: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn inode_flags_of_a_read_only_file_cannot_be_changed_without_the_mount_view() {
    if !full_level_or_skip("inode flags") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "inode-flags");
        let file = fx.p("repo/file.txt");
        let a = attack_bin().to_string_lossy().into_owned();
        let flags = ["--ro", &fx.p("repo")];
        let mut proved = 0;
        for op in ["setflags", "fssetxattr", "file-setattr"] {
            if !works_outside(&fx, op, &file) {
                let required = std::env::var("JAIL_TEST_REQUIRE").as_deref() == Ok("full");
                assert!(
                    op == "file-setattr" || !required,
                    "{op} does not work outside here"
                );
                eprintln!("skipping {op}: not possible on this filesystem or kernel");
                continue;
            }
            // The mount view (EROFS) and seccomp (EPERM) each refuse it alone; Landlock does
            // not, so with both off it works.
            Attack::new(
                op,
                &flags,
                vec![a.clone(), op.into(), file.clone()],
                &[Layer::Mount, Layer::Seccomp],
            )
            .prove(&fx);
            proved += 1;
        }
        assert!(proved > 0 || std::env::var("JAIL_TEST_REQUIRE").is_err());

        // The real chattr, at the partial level (no mount view): refused, flags unchanged.
        if std::path::Path::new("/usr/bin/chattr").exists() && works_outside(&fx, "setflags", &file)
        {
            let before = lsattr(&file);
            let chattr = ["--ro", &fx.p("repo"), "--", "/usr/bin/chattr", "+d", &file];
            let run = fx.jail_with(&chattr, &[Layer::Mount], &[]);
            assert!(
                !run.ok(),
                "as {who:?}: chattr +d worked\n{}",
                run.describe()
            );
            assert!(
                run.stderr.contains("Operation not permitted"),
                "{}",
                run.describe()
            );
            assert_eq!(lsattr(&file), before, "as {who:?}: the flags changed");
            // With seccomp off too, the same chattr works: the refusal above is seccomp's.
            let run = fx.jail_with(&chattr, &[Layer::Mount, Layer::Seccomp], &[]);
            assert!(
                run.ok(),
                "as {who:?}: chattr failed unconfined\n{}",
                run.describe()
            );
            assert_ne!(lsattr(&file), before, "as {who:?}: chattr changed nothing");
            let mut undo = fx.command(std::path::Path::new("/usr/bin/chattr"), &["-d", &file]);
            assert!(undo.status().unwrap().success());
        }

        // The gap text says what holds at the partial level.
        let dry = |off: &[Layer]| {
            let run = fx.jail_with(&["--dry-run", "--", "true"], off, &[]);
            assert!(run.ok(), "{}", run.describe());
            let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
            v["gaps"].to_string()
        };
        let gaps = dry(&[Layer::Mount]);
        assert!(
            gaps.contains("inode flags are refused by seccomp"),
            "{gaps}"
        );
        let gaps = dry(&[Layer::Mount, Layer::Seccomp]);
        assert!(gaps.contains("inode flags such as chattr's"), "{gaps}");
    }
}
