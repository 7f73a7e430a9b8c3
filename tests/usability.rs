//! Everyday use of the jail, as root and as an unprivileged user: git in a read-only and in a
//! writable repository, interpreters, writes where allowed (and only there), the private /tmp,
//! pipes and stdin, exit codes, the timeout, --cwd, what the command sees of its confinement
//! (/proc/self/status, ps), --dry-run and `jail probe`.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Fixture, Run, Who, full_level_or_skip, jail_bin, processes_with, users};

/// A PATH every user can search (root's PATH may start with directories under /root, which make
/// execvp report EACCES instead of ENOENT for the unprivileged user).
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A fixture whose commands get the test environment.
fn fixture(who: Who, name: &str) -> Fixture {
    Fixture::new(who, name).with_env(&env())
}

fn env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("PATH", PATH),
        ("LC_ALL", "C"),
        ("GIT_AUTHOR_NAME", "Jail Test"),
        ("GIT_AUTHOR_EMAIL", "jail@example.invalid"),
        ("GIT_COMMITTER_NAME", "Jail Test"),
        ("GIT_COMMITTER_EMAIL", "jail@example.invalid"),
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_CONFIG_COUNT", "1"),
        ("GIT_CONFIG_KEY_0", "safe.directory"),
        ("GIT_CONFIG_VALUE_0", "*"),
        ("GIT_PAGER", "cat"),
        ("PAGER", "cat"),
    ]
}

/// A name no other test (or test process) uses.
fn unique(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "jail-usab-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// A digit string usable as a unique `sleep` argument (and so as a process marker).
fn unique_seconds(base: u32) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{base}.{:06}{:03}",
        std::process::id() % 1_000_000,
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// A command run outside the jail as the fixture's user, with the test environment.
fn outside(fx: &Fixture, program: &str, args: &[&str]) -> Command {
    let mut cmd = fx.command(Path::new(program), args);
    for (k, v) in env() {
        cmd.env(k, v);
    }
    cmd
}

/// git -C repo `args`, outside the jail, as the fixture's user.
fn git_host(fx: &Fixture, args: &[&str]) -> Run {
    let repo = fx.repo.to_string_lossy().into_owned();
    let mut all = vec!["-C", repo.as_str()];
    all.extend(args);
    Run::from(outside(fx, "git", &all).output().expect("run git"))
}

/// Makes fx.repo a git repository with one commit, created by the fixture's user.
fn git_init(fx: &Fixture) {
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &["commit", "-q", "-m", "initial commit"],
    ] {
        let run = git_host(fx, args);
        assert!(run.ok(), "git {args:?} as {:?}\n{}", fx.who, run.describe());
    }
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path.as_ref())
        .unwrap_or_else(|e| panic!("{}: {e}", path.as_ref().display()))
}

/// Runs `cmd` with `input` written to its stdin (from another thread, so large inputs cannot
/// deadlock against a full stdout pipe).
fn with_stdin(mut cmd: Command, input: Vec<u8>) -> Run {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn jail");
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
        // stdin is closed when dropped here: the command sees end of file.
    });
    let out = child.wait_with_output().expect("wait for jail");
    writer.join().unwrap();
    Run::from(out)
}

fn jail_cmd(fx: &Fixture, args: &[&str]) -> Command {
    let mut cmd = fx.command(jail_bin(), args);
    for (k, v) in env() {
        cmd.env(k, v);
    }
    cmd
}

#[test]
fn git_reads_a_read_only_repository() {
    if !full_level_or_skip("git_reads_a_read_only_repository") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "git-ro");
        git_init(&fx);
        std::fs::write(fx.repo.join("file.txt"), "original\nchanged line\n").unwrap();
        std::fs::write(fx.repo.join("untracked.txt"), "new\n").unwrap();
        fx.give_to(who);
        let head = git_host(&fx, &["rev-parse", "HEAD"])
            .stdout
            .trim()
            .to_string();
        let flags = ["--ro", &fx.p("repo"), "--cwd", &fx.p("repo")];

        let status = fx.jail(&[&flags[..], &["--", "git", "status", "--porcelain"]].concat());
        assert!(status.ok(), "git status as {who:?}\n{}", status.describe());
        assert!(
            status.stdout.contains(" M file.txt") && status.stdout.contains("?? untracked.txt"),
            "git status as {who:?}\n{}",
            status.describe()
        );

        let log = fx.jail(&[&flags[..], &["--", "git", "log", "--format=%H %s"]].concat());
        assert!(log.ok(), "git log as {who:?}\n{}", log.describe());
        assert_eq!(
            log.stdout.trim(),
            format!("{head} initial commit"),
            "git log as {who:?}\n{}",
            log.describe()
        );

        let diff = fx.jail(&[&flags[..], &["--", "git", "diff"]].concat());
        assert!(diff.ok(), "git diff as {who:?}\n{}", diff.describe());
        assert!(
            diff.stdout.contains("--- a/file.txt")
                && diff.stdout.contains("+changed line")
                && diff.stdout.contains(" original"),
            "git diff as {who:?}\n{}",
            diff.describe()
        );

        // The repository is read-only in there: a commit must fail and leave HEAD alone.
        let commit = fx.sh(
            &flags,
            "git commit -qam 'inside' && echo COMMITTED; git add untracked.txt && echo ADDED",
        );
        assert!(
            !commit.stdout.contains("COMMITTED") && !commit.stdout.contains("ADDED"),
            "git could write a read-only repo as {who:?}\n{}",
            commit.describe()
        );
        assert_eq!(
            git_host(&fx, &["rev-parse", "HEAD"]).stdout.trim(),
            head,
            "HEAD moved as {who:?}"
        );
    }
}

#[test]
fn python_and_node_run_scripts() {
    if !full_level_or_skip("python_and_node_run_scripts") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "interp");
        std::fs::write(
            fx.repo.join("hello.py"),
            r#"import json, subprocess, socket, tempfile, os
data = open("file.txt").read().strip()
child = subprocess.run(["echo", "from-child"], capture_output=True, text=True).stdout.strip()
a, b = socket.socketpair()
a.send(b"pair")
with tempfile.NamedTemporaryFile("w", dir="/tmp", delete=False) as f:
    f.write("tmpdata")
print(json.dumps({"data": data, "child": child, "pair": b.recv(4).decode(),
                  "tmp": open(f.name).read(), "sum": sum(range(10))}))
"#,
        )
        .unwrap();
        std::fs::write(
            fx.repo.join("hello.js"),
            r#"const fs = require("fs");
const cp = require("child_process");
const data = fs.readFileSync("file.txt", "utf8").trim();
const child = cp.execSync("echo from-child").toString().trim();
fs.writeFileSync("/tmp/node.txt", "tmpdata");
console.log(JSON.stringify({ data, child, tmp: fs.readFileSync("/tmp/node.txt", "utf8"),
  sum: [...Array(10).keys()].reduce((a, b) => a + b) }));
"#,
        )
        .unwrap();
        fx.give_to(who);
        let flags = ["--ro", &fx.p("repo"), "--cwd", &fx.p("repo")];

        let py = fx.jail(&[&flags[..], &["--", "python3", "hello.py"]].concat());
        assert!(py.ok(), "python3 as {who:?}\n{}", py.describe());
        let v: serde_json::Value = serde_json::from_str(py.stdout.trim())
            .unwrap_or_else(|e| panic!("python3 output as {who:?}: {e}\n{}", py.describe()));
        assert_eq!(
            v,
            serde_json::json!({"data": "original", "child": "from-child", "pair": "pair",
                               "tmp": "tmpdata", "sum": 45}),
            "python3 as {who:?}"
        );

        let node = fx.jail(&[&flags[..], &["--", "node", "hello.js"]].concat());
        assert!(node.ok(), "node as {who:?}\n{}", node.describe());
        let v: serde_json::Value = serde_json::from_str(node.stdout.trim())
            .unwrap_or_else(|e| panic!("node output as {who:?}: {e}\n{}", node.describe()));
        assert_eq!(
            v,
            serde_json::json!({"data": "original", "child": "from-child", "tmp": "tmpdata",
                               "sum": 45}),
            "node as {who:?}"
        );
    }
}

#[test]
fn writes_land_under_rw_and_fail_everywhere_else() {
    if !full_level_or_skip("writes_land_under_rw_and_fail_everywhere_else") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "writes");
        // A place the user may write outside the jail (mode 1777), named by no flag.
        let var_tmp = format!("/var/tmp/{}", unique("outside"));
        let script = format!(
            "echo new > scratch/out.txt && echo W1; \
             mkdir scratch/d && echo W2; \
             rm scratch/movable && echo W3; \
             echo bad > repo/file.txt && echo BAD1; \
             echo bad > repo/new.txt && echo BAD2; \
             echo bad > x.txt && echo BAD3; \
             mkdir repo/d && echo BAD4; \
             echo bad > {var_tmp} && echo BAD5; \
             echo bad > home/x && echo BAD6; \
             true"
        );
        let run = fx.sh(&["--ro", &fx.p("repo"), "--rw", &fx.p("scratch")], &script);
        let _ = std::fs::remove_file(&var_tmp);
        assert!(run.ok(), "as {who:?}\n{}", run.describe());
        for w in ["W1", "W2", "W3"] {
            assert!(
                run.stdout.contains(w),
                "write {w} under --rw failed as {who:?}\n{}",
                run.describe()
            );
        }
        assert!(
            !run.stdout.contains("BAD"),
            "a write outside --rw succeeded as {who:?}\n{}",
            run.describe()
        );
        // The writes under --rw are on the host; nothing else changed.
        assert_eq!(read(fx.scratch.join("out.txt")), "new\n");
        assert!(fx.scratch.join("d").is_dir());
        assert!(!fx.scratch.join("movable").exists());
        assert_eq!(read(fx.repo.join("file.txt")), "original\n");
        assert!(!fx.repo.join("new.txt").exists());
        assert!(!fx.repo.join("d").exists());
        assert!(!fx.dir.join("x.txt").exists());
        assert!(!fx.home.join("x").exists());
        assert!(
            run.stderr.contains("Read-only file system") || run.stderr.contains("denied"),
            "as {who:?}\n{}",
            run.describe()
        );
    }
}

#[test]
fn tmp_is_private_unless_shared_with_tmp_host() {
    if !full_level_or_skip("tmp_is_private_unless_shared_with_tmp_host") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "tmp");
        let host_file = format!("/tmp/{}", unique("host"));
        let inside_file = format!("/tmp/{}", unique("inside"));
        std::fs::write(&host_file, "HOST-TMP-CONTENT\n").unwrap();
        let script = format!(
            "echo inside > {inside_file} && cat {inside_file}; \
             mkdir /tmp/dir && echo MKDIR-OK; \
             if test -e {host_file}; then echo HOST-VISIBLE; else echo HOST-INVISIBLE; fi; \
             ls -A /tmp"
        );
        let private = fx.sh(&[], &script);
        let leaked = Path::new(&inside_file).exists();
        let _ = std::fs::remove_file(&inside_file);
        assert!(private.ok(), "as {who:?}\n{}", private.describe());
        assert!(
            private.stdout.contains("inside\n") && private.stdout.contains("MKDIR-OK"),
            "/tmp not writable inside as {who:?}\n{}",
            private.describe()
        );
        assert!(
            private.stdout.contains("HOST-INVISIBLE") && !private.stdout.contains("HOST-TMP"),
            "host /tmp visible inside as {who:?}\n{}",
            private.describe()
        );
        assert!(
            !leaked,
            "a file written in the private /tmp appeared in the host's"
        );

        // --tmp host: the host's /tmp is seen and written.
        let script = format!("cat {host_file}; echo shared > {inside_file} && echo WROTE");
        let shared = fx.sh(&["--tmp", "host"], &script);
        let landed = std::fs::read_to_string(&inside_file).ok();
        let _ = std::fs::remove_file(&inside_file);
        let _ = std::fs::remove_file(&host_file);
        assert!(shared.ok(), "--tmp host as {who:?}\n{}", shared.describe());
        assert!(
            shared.stdout.contains("HOST-TMP-CONTENT") && shared.stdout.contains("WROTE"),
            "--tmp host as {who:?}\n{}",
            shared.describe()
        );
        assert_eq!(landed.as_deref(), Some("shared\n"), "--tmp host as {who:?}");
    }
}

#[test]
fn pipes_and_stdin_work() {
    if !full_level_or_skip("pipes_and_stdin_work") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "pipes");
        // echo x | jail -- tr x y
        let run = with_stdin(jail_cmd(&fx, &["--", "tr", "x", "y"]), b"x\n".to_vec());
        assert!(run.ok(), "as {who:?}\n{}", run.describe());
        assert_eq!(run.stdout, "y\n", "as {who:?}");

        // Pipes between processes inside.
        let run = fx.sh(
            &[],
            "printf 'b\\na\\nc\\n' | sort | tr a-z A-Z; seq 1 2000 | sort -rn | head -n 1",
        );
        assert!(run.ok(), "as {who:?}\n{}", run.describe());
        assert_eq!(run.stdout, "A\nB\nC\n2000\n", "as {who:?}");

        // stdin is the caller's: a multi-line input, larger than a pipe buffer, comes back whole.
        let input: String = (0..20_000)
            .map(|i| format!("line {i} of the input\n"))
            .collect();
        let run = with_stdin(jail_cmd(&fx, &["--", "cat"]), input.clone().into_bytes());
        assert!(run.ok(), "as {who:?}\n{}", run.stderr);
        assert!(
            run.stdout == input,
            "cat did not echo stdin back as {who:?}"
        );

        // Reading line by line with the shell.
        let run = with_stdin(
            jail_cmd(
                &fx,
                &[
                    "--",
                    "/bin/sh",
                    "-c",
                    "n=0; while read l; do n=$((n+1)); last=$l; done; echo $n $last",
                ],
            ),
            b"one\ntwo\nthree\n".to_vec(),
        );
        assert_eq!(run.stdout, "3 three\n", "as {who:?}\n{}", run.describe());
    }
}

#[test]
fn exit_codes_follow_the_command() {
    if !full_level_or_skip("exit_codes_follow_the_command") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "exit");
        let r = fx.jail(&["--", "true"]);
        assert_eq!(r.code, Some(0), "true as {who:?}\n{}", r.describe());

        let r = fx.sh(&[], "echo before; exit 7");
        assert_eq!(r.code, Some(7), "exit 7 as {who:?}\n{}", r.describe());
        assert_eq!(r.stdout, "before\n");

        let r = fx.sh(&[], "echo before; kill -9 $$; echo after");
        assert_eq!(
            r.code,
            Some(128 + 9),
            "kill -9 as {who:?}\n{}",
            r.describe()
        );
        assert_eq!(r.stdout, "before\n", "as {who:?}");

        let r = fx.sh(&[], "echo before; kill -TERM $$; echo after");
        assert_eq!(
            r.code,
            Some(128 + 15),
            "kill -TERM as {who:?}\n{}",
            r.describe()
        );
        assert_eq!(r.stdout, "before\n", "as {who:?}");

        let r = fx.jail(&["--no-such-flag", "--", "echo", "RAN"]);
        assert_eq!(r.code, Some(125), "bad flag as {who:?}\n{}", r.describe());
        assert!(!r.stdout.contains("RAN"), "as {who:?}\n{}", r.describe());

        // Not executable: a plain file, a directory.
        for path in [fx.p("repo/file.txt"), fx.p("repo/sub")] {
            let r = fx.jail(&["--", &path]);
            assert_eq!(r.code, Some(126), "{path} as {who:?}\n{}", r.describe());
            assert!(
                r.stderr.starts_with("jail: ") && r.stderr.contains("cannot execute"),
                "{path} as {who:?}\n{}",
                r.describe()
            );
        }
        assert_eq!(read(fx.repo.join("file.txt")), "original\n");

        // Not found: by name on PATH, and by path.
        let missing = unique("missing");
        for cmd in [missing.as_str(), "/nonexistent/dir/cmd"] {
            let r = fx.jail(&["--", cmd]);
            assert_eq!(r.code, Some(127), "{cmd} as {who:?}\n{}", r.describe());
            assert!(
                r.stderr.contains(cmd) && r.stderr.contains("not found"),
                "{cmd} as {who:?}\n{}",
                r.describe()
            );
        }
    }
}

#[test]
fn timeout_ends_the_whole_tree_with_124() {
    if !full_level_or_skip("timeout_ends_the_whole_tree_with_124") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "timeout");
        // A plain command, and one that ignores SIGTERM (SIGKILL follows after the grace period);
        // each with a background daemon that must go too.
        for (script_head, min, max) in [("", 0.9, 5.0), ("trap '' TERM; ", 2.9, 6.5)] {
            let fg = unique_seconds(31);
            let bg = unique_seconds(32);
            let script = format!("{script_head}sleep {bg} & echo started; sleep {fg}; echo done");
            let start = Instant::now();
            let r = fx.jail(&["--timeout", "1s", "--", "/bin/sh", "-c", &script]);
            let took = start.elapsed().as_secs_f64();
            assert_eq!(r.code, Some(124), "{script} as {who:?}\n{}", r.describe());
            assert_eq!(
                r.stdout,
                "started\n",
                "{script} as {who:?}\n{}",
                r.describe()
            );
            assert!(
                took >= min && took < max,
                "{script} as {who:?}: took {took:.2}s, expected {min}..{max}s"
            );
            // Both sleeps are gone (the kernel ends the namespace asynchronously: a loaded
            // machine takes its time).
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut left = (processes_with(&fg), processes_with(&bg));
            while (!left.0.is_empty() || !left.1.is_empty()) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
                left = (processes_with(&fg), processes_with(&bg));
            }
            assert!(
                left.0.is_empty() && left.1.is_empty(),
                "{script} as {who:?}: processes outlived the timeout: {left:?}"
            );
        }
    }
}

#[test]
fn git_commits_under_rw_but_hooks_and_config_stay_read_only() {
    if !full_level_or_skip("git_commits_under_rw_but_hooks_and_config_stay_read_only") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "git-rw");
        git_init(&fx);
        let config_before = read(fx.repo.join(".git/config"));
        let script = "echo more >> file.txt && git add file.txt && git commit -q -m 'from inside' \
                      && echo COMMITTED; \
                      printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit && echo HOOK-WRITTEN; \
                      printf '[core]\\n\\thooksPath = /var/tmp\\n' >> .git/config && echo CONFIG-WRITTEN; \
                      git config core.hooksPath /var/tmp && echo GIT-CONFIG-WRITTEN; \
                      true";
        let run = fx.sh(&["--rw", &fx.p("repo"), "--cwd", &fx.p("repo")], script);
        assert!(run.ok(), "as {who:?}\n{}", run.describe());
        assert!(
            run.stdout.contains("COMMITTED"),
            "git commit under --rw failed as {who:?}\n{}",
            run.describe()
        );
        for bad in ["HOOK-WRITTEN", "CONFIG-WRITTEN", "GIT-CONFIG-WRITTEN"] {
            assert!(
                !run.stdout.contains(bad),
                "{bad} as {who:?}\n{}",
                run.describe()
            );
        }
        // On the host: the commit is there, the hook is not, the config is untouched.
        let log = git_host(&fx, &["log", "--format=%s"]);
        assert_eq!(log.stdout, "from inside\ninitial commit\n", "as {who:?}");
        let status = git_host(&fx, &["status", "--porcelain"]);
        assert_eq!(status.stdout, "", "as {who:?}");
        assert!(
            !fx.repo.join(".git/hooks/pre-commit").exists(),
            "as {who:?}"
        );
        assert_eq!(
            read(fx.repo.join(".git/config")),
            config_before,
            "as {who:?}"
        );
    }
}

#[test]
fn a_protected_name_given_exactly_with_rw_becomes_writable() {
    if !full_level_or_skip("a_protected_name_given_exactly_with_rw_becomes_writable") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "prot-named");
        std::fs::write(fx.repo.join(".envrc"), "export A=1\n").unwrap();
        std::fs::create_dir_all(fx.repo.join(".vscode")).unwrap();
        std::fs::write(fx.repo.join(".vscode/settings.json"), "{}\n").unwrap();
        fx.give_to(who);
        let script = "echo 'export B=2' >> repo/.envrc && echo ENVRC-WRITTEN; \
                      echo '{\"x\":1}' > repo/.vscode/settings.json && echo VSCODE-WRITTEN; \
                      echo ok > repo/ok.txt && echo PLAIN-WRITTEN; true";

        let run = fx.sh(&["--rw", &fx.p("repo")], script);
        assert!(
            run.stdout.contains("PLAIN-WRITTEN")
                && !run.stdout.contains("ENVRC-WRITTEN")
                && !run.stdout.contains("VSCODE-WRITTEN"),
            "--rw repo as {who:?}\n{}",
            run.describe()
        );
        assert_eq!(read(fx.repo.join(".envrc")), "export A=1\n");

        let run = fx.sh(
            &["--rw", &fx.p("repo"), "--rw", &fx.p("repo/.envrc")],
            script,
        );
        assert!(
            run.stdout.contains("ENVRC-WRITTEN") && !run.stdout.contains("VSCODE-WRITTEN"),
            "--rw repo --rw repo/.envrc as {who:?}\n{}",
            run.describe()
        );
        assert_eq!(read(fx.repo.join(".envrc")), "export A=1\nexport B=2\n");
        assert_eq!(read(fx.repo.join(".vscode/settings.json")), "{}\n");
    }
}

/// BUG: the protected names are only looked for directly under each --rw root, so a repository
/// *inside* a writable directory keeps writable hooks, config and .envrc: an agent run with
/// `--rw ~/projects` can plant `.git/hooks/pre-commit` in any project, which then runs outside the
/// jail on the next commit.
#[test]
fn protected_names_in_a_nested_repository_stay_read_only() {
    if !full_level_or_skip("protected_names_in_a_nested_repository_stay_read_only") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "prot-nested");
        git_init(&fx);
        std::fs::write(fx.repo.join(".envrc"), "export A=1\n").unwrap();
        fx.give_to(who);
        let config_before = read(fx.repo.join(".git/config"));
        let run = fx.sh(
            &["--rw", &fx.p("")],
            "echo pwned > repo/.git/hooks/pre-commit && echo HOOK-WRITTEN; \
             echo '[core]' >> repo/.git/config && echo CONFIG-WRITTEN; \
             echo pwned >> repo/.envrc && echo ENVRC-WRITTEN; \
             echo ok > repo/ok.txt && echo PLAIN-WRITTEN; true",
        );
        assert!(run.stdout.contains("PLAIN-WRITTEN"), "{}", run.describe());
        assert!(
            !fx.repo.join(".git/hooks/pre-commit").exists()
                && read(fx.repo.join(".git/config")) == config_before
                && read(fx.repo.join(".envrc")) == "export A=1\n",
            "--rw of the directory holding a repository as {who:?}\n{}",
            run.describe()
        );
    }
}

/// BUG: `--rw repo/.git` (what a worktree or a separate git dir needs for commits) leaves
/// repo/.git/hooks and repo/.git/config writable: the protected names are matched as
/// `<rw root>/.git/hooks`, never as `hooks` directly inside a git directory.
#[test]
fn protected_names_stay_read_only_when_rw_names_the_git_dir() {
    if !full_level_or_skip("protected_names_stay_read_only_when_rw_names_the_git_dir") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "prot-gitdir");
        git_init(&fx);
        let config_before = read(fx.repo.join(".git/config"));
        let run = fx.sh(
            &["--rw", &fx.p("repo/.git")],
            "echo pwned > repo/.git/hooks/pre-commit && echo HOOK-WRITTEN; \
             echo '[core]' >> repo/.git/config && echo CONFIG-WRITTEN; \
             touch repo/.git/objects/x && echo OBJECTS-WRITTEN; true",
        );
        assert!(run.stdout.contains("OBJECTS-WRITTEN"), "{}", run.describe());
        assert!(
            !fx.repo.join(".git/hooks/pre-commit").exists()
                && read(fx.repo.join(".git/config")) == config_before,
            "--rw repo/.git as {who:?}\n{}",
            run.describe()
        );
    }
}

#[test]
fn cwd_sets_the_working_directory_inside_the_view() {
    if !full_level_or_skip("cwd_sets_the_working_directory_inside_the_view") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "cwd");
        let script = "pwd; cat file.txt; echo bad > rel.txt && echo BAD; true";
        let run = fx.sh(&["--ro", &fx.p("repo"), "--cwd", &fx.p("repo")], script);
        assert!(run.ok(), "as {who:?}\n{}", run.describe());
        assert_eq!(
            run.stdout,
            format!("{}\noriginal\n", fx.repo.display()),
            "as {who:?}\n{}",
            run.describe()
        );
        assert!(!fx.repo.join("rel.txt").exists(), "as {who:?}");

        // A relative --cwd (against the launcher's directory) in a writable place.
        let run = fx.sh(
            &["--rw", &fx.p("repo/sub"), "--cwd", "repo/sub"],
            "pwd; echo made > made.txt && echo MADE",
        );
        assert!(run.ok(), "as {who:?}\n{}", run.describe());
        assert_eq!(
            run.stdout,
            format!("{}\nMADE\n", fx.repo.join("sub").display()),
            "as {who:?}"
        );
        assert_eq!(read(fx.repo.join("sub/made.txt")), "made\n");

        // Without --cwd: the launcher's own directory.
        let run = fx.sh(&[], "pwd");
        assert_eq!(run.stdout, format!("{}\n", fx.dir.display()), "as {who:?}");
    }
}

#[test]
fn the_command_sees_its_confinement_in_proc() {
    if !full_level_or_skip("the_command_sees_its_confinement_in_proc") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "status");
        let run = fx.jail(&["--", "cat", "/proc/self/status"]);
        assert!(run.ok(), "as {who:?}\n{}", run.describe());
        let field = |name: &str| -> String {
            run.stdout
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .map(|v| v.trim().to_string())
                .unwrap_or_else(|| panic!("no {name} in /proc/self/status:\n{}", run.stdout))
        };
        assert_eq!(field("NoNewPrivs"), "1", "as {who:?}");
        assert_eq!(field("Seccomp"), "2", "as {who:?}");
        for caps in ["CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd"] {
            assert_eq!(field(caps), "0000000000000000", "{caps} as {who:?}");
        }
        // Root outside holds capabilities: emptying them is the jail's doing.
        if who == Who::Root {
            let outside = Run::from(
                outside(&fx, "cat", &["/proc/self/status"])
                    .output()
                    .unwrap(),
            );
            assert!(
                !outside.stdout.contains("CapEff:\t0000000000000000"),
                "root outside has no capabilities?\n{}",
                outside.stdout
            );
        }
    }
}

#[test]
fn ps_inside_shows_only_the_jails_processes() {
    if !full_level_or_skip("ps_inside_shows_only_the_jails_processes") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "ps");
        let marker = unique_seconds(33);
        let mut outsider = Command::new("sleep")
            .arg(&marker)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        // Wait until it has exec'd (its command line is the marker then).
        let deadline = Instant::now() + Duration::from_secs(5);
        while processes_with(&marker).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !processes_with(&marker).is_empty(),
            "the outside process never started"
        );
        let run = fx.jail(&["--", "ps", "-eo", "pid=,args="]);
        let _ = outsider.kill();
        let _ = outsider.wait();
        assert!(run.ok(), "as {who:?}\n{}", run.describe());
        assert!(
            !run.stdout.contains(&marker),
            "a process outside is visible as {who:?}\n{}",
            run.stdout
        );
        let pids: Vec<u32> = run
            .stdout
            .lines()
            .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
            .collect();
        assert!(
            pids.contains(&1) && pids.len() <= 3 && pids.iter().all(|p| *p < 10),
            "as {who:?}: not a fresh pid namespace\n{}",
            run.stdout
        );
        assert!(
            run.stdout.lines().any(|l| l.contains("ps -eo")),
            "as {who:?}\n{}",
            run.stdout
        );
    }
}

#[test]
fn dry_run_prints_the_plan_and_runs_nothing() {
    if !full_level_or_skip("dry_run_prints_the_plan_and_runs_nothing") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "dry");
        let touch = format!("touch {}", fx.p("scratch/created"));
        let run = fx.jail(&[
            "--dry-run",
            "--rw",
            &fx.p("scratch"),
            "--",
            "/bin/sh",
            "-c",
            &touch,
        ]);
        assert!(run.ok(), "as {who:?}\n{}", run.describe());
        assert!(
            !fx.scratch.join("created").exists(),
            "--dry-run ran the command as {who:?}"
        );
        let v: serde_json::Value = serde_json::from_str(&run.stdout)
            .unwrap_or_else(|e| panic!("dry run is not JSON ({e}):\n{}", run.stdout));
        for key in ["policy", "layers", "level", "mount", "landlock", "seccomp"] {
            assert!(
                v.get(key).is_some_and(|x| !x.is_null()),
                "no {key} in the dry run as {who:?}:\n{}",
                run.stdout
            );
        }
        assert_eq!(v["level"], "full");
        assert_eq!(
            v["policy"]["command"],
            serde_json::json!(["/bin/sh", "-c", touch])
        );
        let rules = v["policy"]["rules"].as_array().expect("policy.rules");
        assert!(
            rules
                .iter()
                .any(|r| r["path"] == fx.p("scratch") && r["access"] == "rw"),
            "no rw rule for scratch:\n{}",
            run.stdout
        );
    }
}

/// `-v` prints where a launch spends its time, one line per phase, from each process of the
/// tree; docs/performance.md reads start-up from these lines.
#[test]
fn verbose_prints_a_timing_line_per_phase_from_each_process() {
    if !full_level_or_skip("verbose_prints_a_timing_line_per_phase_from_each_process") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "timing");
        let run = fx.jail(&["-v", "--", "/bin/true"]);
        assert!(run.ok(), "as {who:?}\n{}", run.describe());
        let lines: Vec<&str> = run
            .stderr
            .lines()
            .filter(|l| l.starts_with("jail: timing:"))
            .collect();
        let mut last = 0.0_f64;
        let mut pids = std::collections::BTreeSet::new();
        for phase in [
            "arguments parsed",
            "policy resolved",
            "namespaces cloned",
            "init: mount view built",
            "command: landlock applied",
            "command: confined, exec",
            "command ended",
            "done",
        ] {
            let line = lines.iter().find(|l| l.contains(phase)).unwrap_or_else(|| {
                panic!("no timing line for {phase:?} as {who:?}:\n{}", run.stderr)
            });
            // "jail: timing:    1.234 ms  what (pid N)": times in order, pids of the processes.
            let ms: f64 = line["jail: timing:".len()..]
                .split_whitespace()
                .next()
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("no time in {line:?}"));
            assert!(
                ms >= last,
                "{phase:?} at {ms} ms is before {last} ms:\n{}",
                run.stderr
            );
            last = ms;
            pids.insert(line.rsplit("(pid ").next().unwrap_or_default().to_string());
        }
        assert!(
            pids.len() >= 3,
            "the lines come from fewer than three processes (supervisor, init, command):\n{}",
            run.stderr
        );
        let quiet = fx.jail(&["--", "/bin/true"]);
        assert!(
            !quiet.stderr.contains("jail: timing:"),
            "timing lines without -v:\n{}",
            quiet.stderr
        );
    }
}

#[test]
fn probe_reports_full_level_as_text_and_json() {
    if !full_level_or_skip("probe_reports_full_level_as_text_and_json") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "probe");
        let text = Run::from(fx.command(jail_bin(), &["probe"]).output().unwrap());
        assert!(text.ok(), "as {who:?}\n{}", text.describe());
        assert!(
            text.stdout.contains("level:            full")
                && text.stdout.contains("landlock:         yes, ABI "),
            "as {who:?}\n{}",
            text.stdout
        );
        let expect_running_as = if who == Who::Root && common::is_root() {
            "running as:       root".to_string()
        } else {
            format!("running as:       uid {}", common::uid_of(who))
        };
        assert!(
            text.stdout.contains(&expect_running_as),
            "as {who:?}\n{}",
            text.stdout
        );

        let json = Run::from(
            fx.command(jail_bin(), &["probe", "--json"])
                .output()
                .unwrap(),
        );
        assert!(json.ok(), "as {who:?}\n{}", json.describe());
        let v: serde_json::Value = serde_json::from_str(&json.stdout)
            .unwrap_or_else(|e| panic!("probe --json is not JSON ({e}):\n{}", json.stdout));
        assert!(
            v["features"]["landlock_abi"].as_u64().unwrap_or(0) > 0,
            "{}",
            json.stdout
        );
        assert_eq!(v["level"], "full", "{}", json.stdout);
        assert_eq!(
            v["layers"],
            serde_json::json!({"mount": true, "landlock": true, "seccomp": true})
        );
        assert_eq!(
            v["features"]["euid"].as_u64(),
            Some(common::uid_of(who) as u64)
        );
    }
}

/// A project under /tmp (`cd /tmp/x && jail -- …`) just works: the private /tmp shows it at its
/// own path, read-only by default (each of the mount view and Landlock refuses a write alone),
/// writable with --rw; the rest of the host's /tmp stays out of sight.
#[test]
fn a_project_under_tmp_is_shown_in_the_private_tmp() {
    if !full_level_or_skip("a_project_under_tmp_is_shown_in_the_private_tmp") {
        return;
    }
    use common::{Attack, Layer, sh_argv};
    for who in users() {
        let fx = fixture(who, "tmp-project");
        let project =
            Path::new("/tmp").join(format!("jail-test-project-{}-{who:?}", std::process::id()));
        let _ = std::fs::remove_dir_all(&project);
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(project.join("f"), "before\n").unwrap();
        let neighbour =
            Path::new("/tmp").join(format!("jail-test-neighbour-{}", std::process::id()));
        std::fs::write(&neighbour, "host tmp\n").unwrap();
        if who == Who::User {
            common::chown_tree(&project, common::uid_of(who));
        }
        let dir = project.to_str().unwrap();
        let run = fx.sh_at(
            &project,
            &[],
            &format!(
                "cat f && pwd && ! test -e {} && touch /tmp/scratch && echo OK",
                neighbour.display()
            ),
            &[],
        );
        assert!(
            run.ok()
                && run.stdout.contains("before")
                && run.stdout.contains(dir)
                && run.stdout.contains("OK"),
            "as {who:?}\n{}",
            run.describe()
        );
        Attack::new(
            "write to a project under /tmp (read-only by default)",
            &["--cwd", dir],
            sh_argv(
                "if echo planted >> f; then echo 'ALLOWED write'; else echo 'BLOCKED write'; exit 1; fi",
            ),
            &[Layer::Mount, Layer::Landlock],
        )
        .prove(&fx);
        std::fs::write(project.join("f"), "before\n").unwrap();
        let run = fx.sh_at(
            &project,
            &["--rw", "."],
            "echo after >> f && echo new > g",
            &[],
        );
        assert!(run.ok(), "--rw as {who:?}\n{}", run.describe());
        assert_eq!(
            std::fs::read_to_string(project.join("f")).unwrap(),
            "before\nafter\n"
        );
        assert!(project.join("g").exists());
        // A credential file a variable names inside the shown tree stays hidden, also when the
        // working directory reaches the tree through a symlink.
        std::fs::write(project.join("creds"), "SECRET-CREDS\n").unwrap();
        let link = fx.dir.join("to-tmp-project");
        std::os::unix::fs::symlink(&project, &link).unwrap();
        let creds = format!("{dir}/creds");
        for cwd in [dir.to_string(), link.to_string_lossy().into_owned()] {
            let run = fx.sh_at(
                &fx.dir,
                &["--cwd", &cwd],
                &format!("cat {creds}"),
                &[("AWS_SHARED_CREDENTIALS_FILE", &creds)],
            );
            assert!(
                !run.stdout.contains("SECRET-CREDS"),
                "--cwd {cwd} as {who:?}\n{}",
                run.describe()
            );
        }
        let _ = std::fs::remove_dir_all(&project);
        let _ = std::fs::remove_file(&neighbour);
    }
}

/// `git config` under --rw fails on the protected .git/config (a read-only bind: the kernel
/// answers git's rename with EBUSY); jail then names the protection and the flag that allows it,
/// and that flag works. A plain git run prints no such line.
#[test]
fn git_config_under_rw_names_the_protection_and_the_way_out() {
    if !full_level_or_skip("git_config_under_rw_names_the_protection_and_the_way_out") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "gitconfig");
        common::git(&fx, &["init", "-q"]);
        let repo = fx.p("repo");
        let config = format!("{repo}/.git/config");
        let set_name = |flags: &[&str]| {
            let mut args = flags.to_vec();
            args.extend(["--", "git", "-C", &repo, "config", "user.name", "X"]);
            fx.jail(&args)
        };
        let run = set_name(&["--rw", &repo]);
        assert!(
            !run.ok(),
            "as {who:?}: protected config changed\n{}",
            run.describe()
        );
        assert!(
            run.stderr.contains(&format!("jail: {config} is protected"))
                && run.stderr.contains(&format!("write there: --rw {config}")),
            "as {who:?}\n{}",
            run.describe()
        );
        assert!(
            !std::fs::read_to_string(&config)
                .unwrap()
                .contains("name = X")
        );
        let run = fx.jail(&["--rw", &repo, "--", "git", "-C", &repo, "status"]);
        assert!(
            run.ok() && !run.stderr.contains("is protected"),
            "as {who:?}\n{}",
            run.describe()
        );
        let run = set_name(&["--rw", &repo, "--rw", &config]);
        assert!(run.ok(), "as {who:?}: the named config\n{}", run.describe());
        assert!(
            std::fs::read_to_string(&config)
                .unwrap()
                .contains("name = X")
        );
    }
}

/// A writable path named inside a writable tree gets no bind of its own (git could not rename
/// onto it), except when it is a mount of its own: then it is made writable as named, while an
/// unnamed submount stays read-only. Root only (it mounts a tmpfs inside the fixture).
#[test]
fn a_mount_named_inside_a_writable_tree_is_made_writable() {
    if !full_level_or_skip("a_mount_named_inside_a_writable_tree_is_made_writable") {
        return;
    }
    if !common::is_root() {
        eprintln!("skipping a_mount_named_inside_a_writable_tree_is_made_writable: root only");
        return;
    }
    let fx = fixture(Who::Root, "submount");
    let sub = fx.repo.join("sub");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "tmpfs"])
        .arg(&sub)
        .status()
        .unwrap();
    assert!(mounted.success());
    let repo = fx.p("repo");
    let named = fx.sh(
        &["--rw", &repo, "--rw", &fx.p("repo/sub")],
        &format!("echo a > {repo}/sub/x"),
    );
    let unnamed = fx.sh(&["--rw", &repo], &format!("echo a > {repo}/sub/y"));
    let _ = Command::new("umount").arg(&sub).status();
    assert!(named.ok(), "the named submount\n{}", named.describe());
    assert!(
        !unnamed.ok(),
        "an unnamed submount became writable\n{}",
        unnamed.describe()
    );
}

/// A linked worktree (its `.git` a gitfile naming `main/.git/worktrees/wt`) given with --rw:
/// git add, commit and checkout -b work there, and the commit is the main repository's; its
/// hooks, config, the worktree's config.worktree and its work tree stay read-only.
#[test]
fn a_linked_worktree_under_rw_commits_and_the_main_repository_stays_read_only() {
    if !full_level_or_skip(
        "a_linked_worktree_under_rw_commits_and_the_main_repository_stays_read_only",
    ) {
        return;
    }
    for who in users() {
        let fx = fixture(who, "worktree");
        let (main, wt) = (fx.p("main"), fx.p("wt"));
        std::fs::create_dir_all(&main).unwrap();
        fx.give_to(who);
        let git = |args: &[&str]| {
            let out = fx.command("git".as_ref(), args).output().unwrap();
            assert!(
                out.status.success(),
                "as {who:?}: git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        git(&["init", "-q", &main]);
        git(&["-C", &main, "commit", "-q", "--allow-empty", "-m", "init"]);
        git(&["-C", &main, "worktree", "add", "-q", &wt]);
        let config_worktree = format!("{main}/.git/worktrees/wt/config.worktree");
        // Present, so the view keeps it read-only (an absent one is a reported gap).
        std::fs::write(&config_worktree, "").unwrap();
        std::fs::write(format!("{main}/tracked"), "main\n").unwrap();
        std::fs::write(format!("{wt}/f"), "x\n").unwrap();
        fx.give_to(who);
        for cmd in [
            &["add", "f"][..],
            &["commit", "-q", "-m", "in the worktree"],
            &["checkout", "-q", "-b", "x"],
        ] {
            let mut args = vec!["--rw", &wt, "--", "git", "-C", &wt];
            args.extend(cmd);
            let run = fx.jail(&args);
            assert!(run.ok(), "as {who:?}: git {cmd:?}\n{}", run.describe());
        }
        let log = git(&["-C", &main, "log", "--all", "--format=%s %D"]);
        assert!(
            log.contains("in the worktree") && log.contains(" x"),
            "as {who:?}: {log}"
        );
        for (name, target) in [
            (
                "a hook of the main repository",
                format!("{main}/.git/hooks/pre-commit"),
            ),
            (
                "the main repository's config",
                format!("{main}/.git/config"),
            ),
            ("the worktree's config.worktree", config_worktree.clone()),
            ("the main repository's work tree", format!("{main}/tracked")),
        ] {
            prove_append_refused(&fx, &format!("{name} from the worktree"), &wt, &target);
            // The run with both layers off wrote it (and the after-run check may have moved
            // it aside): the next attack starts from the tree as it was.
            common::restore_quarantined(Path::new(&format!("{main}/.git/worktrees/wt")));
            let _ = std::fs::remove_file(format!("{main}/.git/hooks/pre-commit"));
        }
    }
}

/// Appending to `target` from a shell in `dir` (given with --rw) is refused by the mount view
/// alone and by Landlock alone, and works with both off.
fn prove_append_refused(fx: &Fixture, what: &str, dir: &str, target: &str) {
    use common::{Attack, Layer, sh_argv};
    let script = format!(
        "if echo '[core]' >> {target}; then echo 'ALLOWED write'; \
         else echo 'BLOCKED write'; exit 1; fi"
    );
    Attack::new(
        &format!("write {what}"),
        &["--rw", dir, "--cwd", dir],
        sh_argv(&script),
        &[Layer::Mount, Layer::Landlock],
    )
    .prove(fx);
}

/// A submodule's checkout given with --rw: git add and commit work there (its git directory is
/// in the superproject's .git/modules), and its config and hooks, the superproject's config and
/// its work tree stay read-only.
#[test]
fn a_submodule_under_rw_commits_and_its_config_and_hooks_stay_read_only() {
    if !full_level_or_skip("a_submodule_under_rw_commits_and_its_config_and_hooks_stay_read_only") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "submodule");
        let (lib, sup) = (fx.p("lib"), fx.p("super"));
        fx.give_to(who);
        let git = |args: &[&str]| {
            let out = fx.command("git".as_ref(), args).output().unwrap();
            assert!(
                out.status.success(),
                "as {who:?}: git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        git(&["init", "-q", &lib]);
        git(&["-C", &lib, "commit", "-q", "--allow-empty", "-m", "lib"]);
        git(&["init", "-q", &sup]);
        let file = ["-c", "protocol.file.allow=always"];
        git(&[
            &["-C", &sup][..],
            &file,
            &["submodule", "-q", "add", &lib, "x"],
        ]
        .concat());
        git(&["-C", &sup, "commit", "-q", "-m", "add x"]);
        let x = format!("{sup}/x");
        std::fs::write(format!("{x}/f"), "x\n").unwrap();
        fx.give_to(who);
        for cmd in [
            &["add", "f"][..],
            &["commit", "-q", "-m", "in the submodule"],
        ] {
            let mut args = vec!["--rw", &x, "--", "git", "-C", &x];
            args.extend(cmd);
            let run = fx.jail(&args);
            assert!(run.ok(), "as {who:?}: git {cmd:?}\n{}", run.describe());
        }
        let out = fx
            .command("git".as_ref(), &["-C", &x, "log", "--format=%s"])
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&out.stdout).contains("in the submodule"));
        let modules = format!("{sup}/.git/modules/x");
        for (name, target) in [
            ("the submodule's config", format!("{modules}/config")),
            (
                "a hook of the submodule",
                format!("{modules}/hooks/pre-commit"),
            ),
            ("the superproject's config", format!("{sup}/.git/config")),
            ("the superproject's work tree", format!("{sup}/.gitmodules")),
        ] {
            prove_append_refused(&fx, &format!("{name} from the submodule"), &x, &target);
            common::restore_quarantined(Path::new(&modules));
            let _ = std::fs::remove_file(format!("{modules}/hooks/pre-commit"));
        }
    }
}

/// A writable path named inside a writable tree with a protected name beneath it stays a mount
/// point (pinned): renaming it away from its carve-out, then planting a fresh one in its place,
/// is refused by the mount view alone (EBUSY), and by Landlock alone (without the view the tree
/// is split, so no new entry can be made beside the carve-out).
#[test]
fn a_named_writable_directory_with_a_carve_out_beneath_cannot_be_renamed() {
    if !full_level_or_skip("a_named_writable_directory_with_a_carve_out_beneath_cannot_be_renamed")
    {
        return;
    }
    use common::{Attack, Layer, sh_argv};
    for who in users() {
        let fx = fixture(who, "pinned-named");
        std::fs::create_dir_all(fx.repo.join("a/.vscode")).unwrap();
        std::fs::write(fx.repo.join("a/.vscode/settings.json"), "{}\n").unwrap();
        fx.give_to(who);
        let (repo, a) = (fx.p("repo"), fx.p("repo/a"));
        Attack::new(
            "rename a named writable directory away from its carve-out",
            &["--rw", &repo, "--rw", &a],
            sh_argv(&format!(
                "if mv {a} {a}2; then mv {a}2 {a}; echo 'ALLOWED rename'; else echo 'BLOCKED rename'; exit 1; fi"
            )),
            &[Layer::Mount, Layer::Landlock],
        )
        .prove(&fx);
    }
}
