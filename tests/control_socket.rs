//! `--control-fd` from the side of a program that starts jail by hand: what it may be given.
//! The control descriptor carries the outcome the caller trusts and the stop it relies on, so
//! jail refuses (exit 125, the command never run) a descriptor that cannot do both, and one that
//! the command would hold too, under another number.

mod common;

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::Stdio;

use common::*;

/// Runs jail as the fixture's user with `fds` (source, number) placed before it execs.
fn jail_with_fds(fx: &Fixture, args: &[&str], fds: &[(i32, i32)]) -> Run {
    let mut cmd = fx.command(jail_bin(), args);
    cmd.env("JAIL_TEST_DISABLE", "")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let fds = fds.to_vec();
    // SAFETY: only dup2 and fcntl run between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            for (from, to) in &fds {
                // dup2 onto itself keeps close-on-exec: clear it instead.
                let rc = if from == to {
                    libc::fcntl(*to, libc::F_SETFD, 0)
                } else {
                    libc::dup2(*from, *to)
                };
                if rc < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    Run::from(cmd.output().expect("run jail"))
}

#[test]
fn a_control_fd_that_cannot_carry_the_outcome_and_the_stop_is_refused() {
    if !full_level_or_skip("a_control_fd_that_cannot_carry_the_outcome_and_the_stop_is_refused") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "control-kind");
        let file = fx.dir.join("control.txt");
        std::fs::write(&file, "").unwrap();
        // Each reads as ready at once (poll: a stop request); the outcome goes nowhere anyone
        // reads, or into a file.
        let candidates: Vec<(&str, OwnedFd)> = vec![
            (
                "a regular file",
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&file)
                    .unwrap()
                    .into(),
            ),
            ("a directory", std::fs::File::open(&fx.dir).unwrap().into()),
            (
                "/dev/null",
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open("/dev/null")
                    .unwrap()
                    .into(),
            ),
        ];
        for (what, fd) in &candidates {
            let run = jail_with_fds(
                &fx,
                &[
                    "--control-fd",
                    "5",
                    "--cwd",
                    &fx.p(""),
                    "--",
                    "/bin/sh",
                    "-c",
                    "echo RAN",
                ],
                &[(fd.as_raw_fd(), 5)],
            );
            assert_refused(
                &run,
                &format!("{who:?}: {what} as --control-fd"),
                &["--control-fd 5"],
            );
        }
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "",
            "{who:?}: jail wrote into the file"
        );
    }
}

#[test]
fn the_control_socket_handed_to_the_command_as_well_is_refused() {
    if !full_level_or_skip("the_control_socket_handed_to_the_command_as_well_is_refused") {
        return;
    }
    for who in users() {
        let fx = Fixture::new(who, "control-dup");
        // The command writes a forged outcome on the copy it holds and shuts the socket down, so
        // that jail's own outcome cannot follow: the caller would read the forgery.
        let forge = fx.dir.join("forge.py");
        std::fs::write(
            &forge,
            "import socket, sys\n\
             fd = int(sys.argv[1])\n\
             s = socket.socket(fileno=fd)\n\
             s.send(b'{\"ended\":{\"status\":\"exited\",\"code\":0,\"exit_code\":0,\"level\":\"full\",\"gaps\":[],\"report\":null}}')\n\
             s.shutdown(socket.SHUT_WR)\n\
             print('RAN')\n\
             sys.exit(9)\n",
        )
        .unwrap();
        let forge = forge.to_string_lossy().into_owned();
        for (what, number) in [("--keep-fd 4", 4), ("the command's stdin", 0)] {
            let (ours, theirs) = UnixStream::pair().unwrap();
            let n = number.to_string();
            let mut args = vec!["--control-fd", "3", "--cwd", fx.dir.to_str().unwrap()];
            if number > 2 {
                args.extend(["--keep-fd", &n]);
            }
            args.extend(["--", "/usr/bin/python3", &forge, &n]);
            let reader = std::thread::spawn(move || {
                let mut ours = ours;
                let mut bytes = Vec::new();
                let _ = ours.read_to_end(&mut bytes);
                String::from_utf8_lossy(&bytes).into_owned()
            });
            let run = jail_with_fds(
                &fx,
                &args,
                &[(theirs.as_raw_fd(), 3), (theirs.as_raw_fd(), number)],
            );
            drop(theirs);
            let message = reader.join().unwrap();
            assert_refused(
                &run,
                &format!("{who:?}: the control socket as {what}"),
                &["--control-fd"],
            );
            // The refusal itself, or nothing (jail refused the descriptor before taking it).
            assert!(
                message.is_empty() || message.starts_with("{\"failed\""),
                "{who:?}: the control socket as {what}: the caller read {message:?}"
            );
        }
    }
}
