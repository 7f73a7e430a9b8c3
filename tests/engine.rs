//! jail inside a real container engine (Docker's dockerd, runc): the static (musl) binary as the
//! entrypoint of a `FROM scratch` image, under Docker's default seccomp profile and under the
//! profile platform/container recommends. `.ci/run` starts a dockerd of its own and sets
//! JAIL_TEST_ENGINE=required. Without JAIL_TEST_ENGINE the tests that need the engine are
//! compiled as ignored (build.rs), which the runner counts as skipped.

mod common;

use common::base_dir;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// A reachable engine and the test image built in it.
struct Engine {
    docker: PathBuf,
    host: String,
    image: String,
}

const NOBODY: &str = "65534:65534";

/// The recommended layout's options: the shipped seccomp profile and an unmasked /proc.
fn recommended() -> Vec<String> {
    let profile =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("platform/container/jail-seccomp.json");
    vec![
        "--security-opt".into(),
        format!("seccomp={}", profile.display()),
        "--security-opt".into(),
        "systempaths=unconfined".into(),
    ]
}

fn engine_or_skip(test: &str) -> Option<&'static Engine> {
    static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();
    match ENGINE.get_or_init(find_engine) {
        Ok(e) => Some(e),
        Err(why) if std::env::var("JAIL_TEST_ENGINE").as_deref() == Ok("required") => {
            panic!("JAIL_TEST_ENGINE=required but {why}")
        }
        Err(why) => {
            eprintln!("skipping {test}: {why}");
            None
        }
    }
}

fn find_engine() -> Result<Engine, String> {
    // Debian's client first: it speaks the API version of Debian's dockerd.
    let docker = ["/usr/bin/docker", "/usr/local/bin/docker"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or("no docker client (apt-get install docker.io)")?;
    let host = std::env::var("JAIL_TEST_DOCKER_HOST")
        .unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
    let ping = Command::new(&docker)
        .args(["-H", &host, "version", "--format", "{{.Server.Version}}"])
        .output()
        .map_err(|e| format!("{}: {e}", docker.display()))?;
    if !ping.status.success() {
        return Err(format!(
            "no engine answers at {host} (.ci/run starts one): {}",
            String::from_utf8_lossy(&ping.stderr).trim()
        ));
    }
    let arch = std::env::consts::ARCH;
    let static_jail = std::env::var_os("JAIL_TEST_STATIC_JAIL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(format!("target/{arch}-unknown-linux-musl/release/jail"))
        });
    if !static_jail.exists() {
        return Err(format!(
            "no static jail at {} (cargo build --release --target {arch}-unknown-linux-musl)",
            static_jail.display()
        ));
    }
    let busybox = Path::new("/bin/busybox");
    let is_static = Command::new("file")
        .arg(busybox)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("statically linked"))
        .unwrap_or(false);
    if !is_static {
        return Err("no static /bin/busybox (apt-get install busybox-static)".into());
    }
    let engine = Engine {
        docker,
        host,
        image: "jail-engine-test:latest".into(),
    };
    engine.build_image(&static_jail, busybox)?;
    Ok(engine)
}

impl Engine {
    /// `FROM scratch`: the static jail, a static busybox for the shell and tools, and the users.
    /// Built with the legacy builder (no BuildKit), as the shipped Dockerfile must be.
    fn build_image(&self, jail: &Path, busybox: &Path) -> Result<(), String> {
        let ctx = base_dir().join(format!("engine-image-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&ctx);
        for d in ["bin", "etc", "tmp", "work", "out", "home", "ready"] {
            std::fs::create_dir_all(ctx.join(d)).unwrap();
        }
        for d in ["tmp", "work", "out", "home", "ready"] {
            std::fs::set_permissions(ctx.join(d), std::fs::Permissions::from_mode(0o1777)).unwrap();
        }
        std::fs::copy(jail, ctx.join("bin/jail")).unwrap();
        std::fs::copy(busybox, ctx.join("bin/busybox")).unwrap();
        for tool in [
            "sh", "ls", "cat", "touch", "sleep", "echo", "mkdir", "rm", "id", "true", "grep",
            "unshare", "chmod", "wc",
        ] {
            std::os::unix::fs::symlink("busybox", ctx.join("bin").join(tool)).unwrap();
        }
        // Where the shipped image and the Kubernetes manifests call jail, and a stand-in for
        // their agent that writes a file in its working directory.
        std::fs::create_dir_all(ctx.join("usr/local/bin")).unwrap();
        std::os::unix::fs::symlink("/bin/jail", ctx.join("usr/local/bin/jail")).unwrap();
        std::fs::write(
            ctx.join("bin/opencode"),
            "#!/bin/sh\necho \"the agent: $*\"\necho made > made-by-agent\n",
        )
        .unwrap();
        std::fs::set_permissions(
            ctx.join("bin/opencode"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(
            ctx.join("etc/passwd"),
            "root:x:0:0::/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/sh\nnobody:x:65534:65534::/home:/bin/sh\n",
        )
        .unwrap();
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("platform/container/Dockerfile.scratch"),
            ctx.join("Dockerfile"),
        )
        .unwrap();
        let out = self
            .docker()
            .env("DOCKER_BUILDKIT", "0")
            .args(["build", "-q", "-t", &self.image])
            .arg(&ctx)
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&ctx);
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "docker build failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    fn docker(&self) -> Command {
        let mut cmd = Command::new(&self.docker);
        cmd.args(["-H", &self.host]);
        cmd
    }

    /// `docker run --rm OPTIONS IMAGE ARGS`: ARGS go to the image's entrypoint, `jail --`.
    fn run(&self, options: &[String], args: &[&str]) -> Output {
        self.docker()
            .args(["run", "--rm", "--network", "none"])
            .args(options)
            .arg(&self.image)
            .args(args)
            .output()
            .unwrap()
    }

    /// `docker run -d --name NAME OPTIONS IMAGE ARGS` after removing any leftover of that name.
    fn start(&self, name: &str, options: &[String], args: &[&str]) {
        let _ = self.docker().args(["rm", "-f", name]).output();
        let started = self
            .docker()
            .args(["run", "-d", "--network", "none", "--name", name])
            .args(options)
            .arg(&self.image)
            .args(args)
            .output()
            .unwrap();
        assert!(started.status.success(), "{name}: {}", text(&started));
    }

    /// `jail ARGS` as the entrypoint, with the image's own entrypoint replaced.
    fn jail(&self, options: &[String], args: &[&str]) -> Output {
        let mut all = options.to_vec();
        all.extend(["--entrypoint".into(), "/bin/jail".into()]);
        self.run(&all, args)
    }
}

/// A host directory the container mounts, writable by everyone (so a refusal is jail's, not
/// the file's owner's).
fn volume(name: &str) -> PathBuf {
    let dir = base_dir().join(format!("engine-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join(".git/hooks")).unwrap();
    std::fs::write(dir.join("tracked"), "before\n").unwrap();
    for p in [dir.clone(), dir.join(".git"), dir.join(".git/hooks")] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    std::fs::set_permissions(dir.join("tracked"), std::fs::Permissions::from_mode(0o666)).unwrap();
    dir
}

fn mount(dir: &Path, at: &str) -> Vec<String> {
    vec!["-v".into(), format!("{}:{at}", dir.display())]
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The configurations of item 1: Docker's default profile as root and as nobody, without any
/// capability and with no-new-privileges, with a read-only root filesystem.
fn default_profile_variants() -> Vec<(&'static str, Vec<String>)> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        ("root", vec![]),
        ("nobody", s(&["--user", NOBODY])),
        (
            "nobody, no capabilities, no-new-privileges",
            s(&[
                "--user",
                NOBODY,
                "--cap-drop",
                "ALL",
                "--security-opt",
                "no-new-privileges",
            ]),
        ),
        ("root, read-only root filesystem", s(&["--read-only"])),
    ]
}

/// Item 1's configurations under Docker's default profile, and the recommended one as root and
/// as nobody.
fn every_configuration() -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = default_profile_variants()
        .into_iter()
        .map(|(what, o)| (format!("default profile, {what}"), o))
        .collect();
    out.push(("recommended profile, root".into(), recommended()));
    let mut nobody = recommended();
    nobody.extend(["--user".into(), NOBODY.into()]);
    out.push(("recommended profile, nobody".into(), nobody));
    out
}

fn level_of(engine: &Engine, options: &[String]) -> String {
    let out = engine.jail(options, &["probe", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("probe --json");
    v["level"].as_str().unwrap_or_default().to_string()
}

/// Under Docker's default profile jail cannot make a user namespace: it says level partial, and
/// Landlock and seccomp still refuse the writes the same container makes without jail.
#[test]
#[cfg_attr(
    not(jail_test_engine),
    ignore = "needs a container engine: set JAIL_TEST_ENGINE=1 and JAIL_TEST_DOCKER_HOST (see .ci/run)"
)]
fn under_dockers_default_profile_jail_is_partial_and_refuses_writes() {
    let Some(engine) =
        engine_or_skip("under_dockers_default_profile_jail_is_partial_and_refuses_writes")
    else {
        return;
    };
    for (what, options) in default_profile_variants() {
        assert_eq!(level_of(engine, &options), "partial", "{what}");
        let project = volume("partial");
        let mut opts = options.clone();
        opts.extend(mount(&project, "/work"));
        let attack = "echo planted > /work/tracked; echo planted > /work/.git/hooks/pre-commit";
        let out = engine.jail(&opts, &["--ro", "/work", "--", "sh", "-c", attack]);
        assert_eq!(
            std::fs::read_to_string(project.join("tracked")).unwrap(),
            "before\n",
            "{what}: {}",
            text(&out)
        );
        assert!(
            !project.join(".git/hooks/pre-commit").exists(),
            "{what}: {}",
            text(&out)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("partial confinement"),
            "{what}: the level is said: {}",
            text(&out)
        );
        // The same writes without jail succeed: it is jail that refused them.
        let mut bare = opts.clone();
        bare.extend(["--entrypoint".into(), "/bin/sh".into()]);
        let out = engine.run(&bare, &["-c", attack]);
        assert!(out.status.success(), "{what}: control: {}", text(&out));
        assert_eq!(
            std::fs::read_to_string(project.join("tracked")).unwrap(),
            "planted\n",
            "{what}"
        );
        // The command's exit code is the container's.
        let out = engine.jail(&options, &["--", "sh", "-c", "exit 7"]);
        assert_eq!(out.status.code(), Some(7), "{what}: {}", text(&out));
        let _ = std::fs::remove_dir_all(&project);
    }
}

/// The recommended profile (platform/container: jail-seccomp.json and an unmasked /proc) gives
/// the full level, as root and as nobody; jail's own filter refuses the calls it opened.
#[test]
#[cfg_attr(
    not(jail_test_engine),
    ignore = "needs a container engine: set JAIL_TEST_ENGINE=1 and JAIL_TEST_DOCKER_HOST (see .ci/run)"
)]
fn the_recommended_profile_gives_the_full_level() {
    let Some(engine) = engine_or_skip("the_recommended_profile_gives_the_full_level") else {
        return;
    };
    for user in ["0:0", NOBODY] {
        let mut options = recommended();
        options.extend(["--user".into(), user.into()]);
        assert_eq!(level_of(engine, &options), "full", "user {user}");
        let project = volume("full");
        let mut opts = options.clone();
        opts.extend(mount(&project, "/work"));
        let out = engine.jail(
            &opts,
            &[
                "--require",
                "full",
                "--rw",
                "/work",
                "--",
                "sh",
                "-c",
                "echo after > /work/tracked && echo new > /work/new && \
               ! echo planted > /work/.git/hooks/pre-commit && ! unshare -U true && echo held",
            ],
        );
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("held"),
            "user {user}: {}",
            text(&out)
        );
        assert_eq!(
            std::fs::read_to_string(project.join("tracked")).unwrap(),
            "after\n"
        );
        assert!(
            project.join("new").exists(),
            "a new file at the top of a project with .git"
        );
        assert!(!project.join(".git/hooks/pre-commit").exists());
        // Without jail, the profile leaves unshare open: jail's filter is what closes it.
        let mut bare = options.clone();
        bare.extend(["--entrypoint".into(), "/bin/unshare".into()]);
        let out = engine.run(&bare, &["-U", "true"]);
        assert!(out.status.success(), "user {user}: control: {}", text(&out));
        let _ = std::fs::remove_dir_all(&project);
    }
}

/// Under the default profile the project's top cannot take new files with --rw (Landlock cannot
/// refuse only the protected names there), so the shipped layout is a copy-on-write run that
/// writes its patch: the agent creates files freely, the host's project is unchanged, the patch
/// holds the changes.
#[test]
#[cfg_attr(
    not(jail_test_engine),
    ignore = "needs a container engine: set JAIL_TEST_ENGINE=1 and JAIL_TEST_DOCKER_HOST (see .ci/run)"
)]
fn the_copy_on_write_layout_lets_the_agent_create_files_under_the_default_profile() {
    let Some(engine) = engine_or_skip(
        "the_copy_on_write_layout_lets_the_agent_create_files_under_the_default_profile",
    ) else {
        return;
    };
    for (what, options) in default_profile_variants() {
        let project = volume("cow");
        let out_dir = volume("out");
        let mut opts = options.clone();
        opts.extend(mount(&project, "/work"));
        opts.extend(mount(&out_dir, "/out"));
        opts.extend([
            "-e".into(),
            "HOME=/home".into(),
            "-w".into(),
            "/work".into(),
        ]);
        if what.contains("read-only") {
            // jail's state (the layer) needs somewhere writable.
            opts.extend(["--tmpfs".into(), "/home:mode=1777".into()]);
        }
        let out = engine.jail(
            &opts,
            &[
                "--cow",
                "/work",
                "--patch",
                "/out/changes.patch",
                "--",
                "sh",
                "-c",
                "echo new > newfile && echo after >> tracked",
            ],
        );
        assert!(out.status.success(), "{what}: {}", text(&out));
        assert!(
            !project.join("newfile").exists(),
            "{what}: the host's project is unchanged"
        );
        let patch = std::fs::read_to_string(out_dir.join("changes.patch")).unwrap_or_default();
        assert!(
            patch.contains("+++ b/newfile") && patch.contains("+after"),
            "{what}: {patch}\n{}",
            text(&out)
        );
        // The limit this layout answers: --rw there refuses a new file at the top.
        let out = engine.jail(
            &opts,
            &["--rw", "/work", "--", "sh", "-c", "echo new > /work/top"],
        );
        assert!(!project.join("top").exists(), "{what}: {}", text(&out));
        let _ = std::fs::remove_dir_all(&project);
        let _ = std::fs::remove_dir_all(&out_dir);
    }
}

/// `docker stop` sends SIGTERM to pid 1, jail: it reaches the command, whose own exit code
/// becomes the container's.
#[test]
#[cfg_attr(
    not(jail_test_engine),
    ignore = "needs a container engine: set JAIL_TEST_ENGINE=1 and JAIL_TEST_DOCKER_HOST (see .ci/run)"
)]
fn docker_stop_reaches_the_command_and_its_exit_code_comes_back() {
    let Some(engine) =
        engine_or_skip("docker_stop_reaches_the_command_and_its_exit_code_comes_back")
    else {
        return;
    };
    for (what, options) in every_configuration() {
        let name = format!("jail-engine-stop-{}", std::process::id());
        engine.start(
            &name,
            &options,
            &[
                "sh",
                "-c",
                "trap 'exit 3' TERM; echo ready; while :; do sleep 0.1; done",
            ],
        );
        wait_for_log(engine, &name, "ready");
        let stop = engine
            .docker()
            .args(["stop", "-t", "20", &name])
            .output()
            .unwrap();
        assert!(stop.status.success(), "{}", text(&stop));
        let code = engine
            .docker()
            .args(["inspect", "-f", "{{.State.ExitCode}}", &name])
            .output()
            .unwrap();
        let _ = engine.docker().args(["rm", "-f", &name]).output();
        assert_eq!(
            String::from_utf8_lossy(&code.stdout).trim(),
            "3",
            "{what}: the trap's exit code"
        );
    }
}

fn wait_for_log(engine: &Engine, name: &str, line: &str) {
    for _ in 0..200 {
        let logs = engine.docker().args(["logs", name]).output().unwrap();
        if String::from_utf8_lossy(&logs.stdout).contains(line) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{name} never printed {line}");
}

/// An orphan in the container is re-parented to pid 1; jail as pid 1 waits for it, so no zombie
/// is left. The same orphan under a pid 1 that never waits (sleep) stays a zombie.
#[test]
#[cfg_attr(
    not(jail_test_engine),
    ignore = "needs a container engine: set JAIL_TEST_ENGINE=1 and JAIL_TEST_DOCKER_HOST (see .ci/run)"
)]
fn jail_as_pid_1_reaps_the_containers_orphans() {
    let Some(engine) = engine_or_skip("jail_as_pid_1_reaps_the_containers_orphans") else {
        return;
    };
    let zombies = |name: &str| -> usize {
        // An orphan made by a `docker exec` shell that exits at once, then counted.
        let out = engine
            .docker()
            .args(["exec", name, "sh", "-c", "sleep 0.2 & exit 0"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let out = engine
            .docker()
            .args([
                "exec",
                name,
                "sh",
                "-c",
                "grep -l '^State:.*Z' /proc/[0-9]*/status | wc -l",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(usize::MAX)
    };
    let mut cases: Vec<(String, Vec<String>, &[&str], bool)> = every_configuration()
        .into_iter()
        .map(|(what, options)| {
            (
                format!("jail, {what}"),
                options,
                &["sleep", "30"][..],
                false,
            )
        })
        .collect();
    cases.push((
        "control: sleep as pid 1".into(),
        vec!["--entrypoint".into(), "/bin/sleep".into()],
        &["30"],
        true,
    ));
    for (what, options, args, expect_zombie) in cases {
        let name = format!("jail-engine-reap-{}", std::process::id());
        engine.start(&name, &options, args);
        let n = zombies(&name);
        let _ = engine.docker().args(["rm", "-f", &name]).output();
        assert_eq!(n > 0, expect_zombie, "{what}: {n} zombies");
    }
}

/// The shipped profile is the engine's default plus exactly jail's one rule.
#[test]
fn the_shipped_profile_adds_one_rule_for_jails_own_calls() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("platform/container/jail-seccomp.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let rules = v["syscalls"].as_array().unwrap();
    let ours: Vec<_> = rules
        .iter()
        .filter(|r| {
            r["comment"]
                .as_str()
                .is_some_and(|c| c.starts_with("jail:"))
        })
        .collect();
    assert_eq!(ours.len(), 1);
    let names: Vec<&str> = ours[0]["names"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    for call in names.iter() {
        assert!(
            [
                "clone",
                "unshare",
                "mount",
                "umount2",
                "mount_setattr",
                "open_tree",
                "move_mount",
                "fsopen",
                "fsconfig",
                "fsmount"
            ]
            .contains(call),
            "{call} is not a call jail makes"
        );
    }
    assert_eq!(
        v["defaultAction"], "SCMP_ACT_ERRNO",
        "the default stays deny"
    );
    // Docker's default still refuses what jail does not need (keyctl, bpf without CAP_SYS_ADMIN).
    assert!(!names.contains(&"setns") && !names.contains(&"pivot_root"));
}

/// The venv with the Kubernetes schema validator (PyPI's kubernetes-validate, with PyYAML),
/// which .ci/run installs.
fn k8s_venv_or_skip(test: &str) -> Option<PathBuf> {
    let venv = std::env::var_os("JAIL_TEST_K8S_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/jail-k8s-venv"));
    if venv.join("bin/kubernetes-validate").exists() {
        return Some(venv);
    }
    let why = format!(
        "no Kubernetes validator in {} (.ci/run installs it)",
        venv.display()
    );
    if std::env::var("JAIL_TEST_ENGINE").as_deref() == Ok("required") {
        panic!("JAIL_TEST_ENGINE=required but {why}");
    }
    eprintln!("skipping {test}: {why}");
    None
}

fn manifests() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("platform/kubernetes");
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    out.sort();
    assert!(out.len() >= 3, "{out:?}");
    out
}

/// Every manifest validates, strictly (an unknown field fails), against the Kubernetes schema;
/// the same validator refuses a manifest with a misspelt field, so it can fail.
#[test]
#[cfg_attr(
    not(jail_test_engine),
    ignore = "needs a container engine: set JAIL_TEST_ENGINE=1 and JAIL_TEST_DOCKER_HOST (see .ci/run)"
)]
fn the_kubernetes_manifests_validate_against_the_schema() {
    let Some(venv) = k8s_venv_or_skip("the_kubernetes_manifests_validate_against_the_schema")
    else {
        return;
    };
    let validate = |files: &[PathBuf]| {
        Command::new(venv.join("bin/kubernetes-validate"))
            .arg("--strict")
            .args(files)
            .output()
            .unwrap()
    };
    let out = validate(&manifests());
    assert!(out.status.success(), "{}", text(&out));
    let job = std::fs::read_to_string(
        manifests()
            .iter()
            .find(|p| p.ends_with("job-full.yaml"))
            .unwrap(),
    )
    .unwrap();
    let bad = base_dir().join(format!("k8s-misspelt-{}.yaml", std::process::id()));
    std::fs::write(&bad, job.replace("hostUsers: false", "hostUser: false")).unwrap();
    let out = validate(std::slice::from_ref(&bad));
    let _ = std::fs::remove_file(&bad);
    assert!(
        !out.status.success(),
        "a misspelt field must fail: {}",
        text(&out)
    );
}

/// A manifest's documents as JSON (PyYAML of the validator's venv).
fn load_yaml(venv: &Path, file: &Path) -> Vec<serde_json::Value> {
    let out = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
        ])
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The pod specs' containers, run in the engine as Kubernetes would run them: the same command,
/// environment, working directory and volumes, and the securityContext as docker options
/// (Localhost seccomp → the shipped profile, procMount Unmasked → systempaths=unconfined,
/// runAsUser/runAsGroup, drop ALL, allowPrivilegeEscalation false, readOnlyRootFilesystem).
/// Not emulated: hostUsers: false (a dockerd-wide setting). Each gives the level its comment
/// names, confirms the confinement from inside for the readiness probe (which passes), and
/// leaves the patch and the report in the artifacts volume.
#[test]
#[cfg_attr(
    not(jail_test_engine),
    ignore = "needs a container engine: set JAIL_TEST_ENGINE=1 and JAIL_TEST_DOCKER_HOST (see .ci/run)"
)]
fn the_kubernetes_containers_run_in_the_engine() {
    let Some(engine) = engine_or_skip("the_kubernetes_containers_run_in_the_engine") else {
        return;
    };
    let Some(venv) = k8s_venv_or_skip("the_kubernetes_containers_run_in_the_engine") else {
        return;
    };
    let mut ran = 0;
    for file in manifests() {
        for doc in load_yaml(&venv, &file) {
            let spec = match doc["kind"].as_str() {
                Some("Job") => &doc["spec"]["template"]["spec"],
                Some("Pod") => &doc["spec"],
                _ => continue,
            };
            let expected = if spec["hostUsers"] == false {
                "full"
            } else {
                "partial"
            };
            for c in spec["containers"].as_array().unwrap() {
                run_pod_container(engine, &file, spec, c, expected);
                ran += 1;
            }
        }
    }
    assert!(ran >= 2, "a full and a partial container");
}

fn run_pod_container(
    engine: &Engine,
    file: &Path,
    spec: &serde_json::Value,
    c: &serde_json::Value,
    expected: &str,
) {
    let what = format!("{}: {}", file.display(), c["name"]);
    let pod = &spec["securityContext"];
    let sc = &c["securityContext"];
    let mut opts: Vec<String> = Vec::new();
    let mut o = |a: &str, b: String| opts.extend([a.to_string(), b]);
    o(
        "--user",
        format!("{}:{}", pod["runAsUser"], pod["runAsGroup"]),
    );
    match pod["seccompProfile"]["type"].as_str() {
        Some("Localhost") => {
            let name = pod["seccompProfile"]["localhostProfile"].as_str().unwrap();
            assert!(name.ends_with("/jail-seccomp.json"), "{what}: {name}");
            o("--security-opt", recommended()[1].clone());
        }
        Some("RuntimeDefault") => {}
        other => panic!("{what}: seccomp profile {other:?}"),
    }
    if sc["procMount"] == "Unmasked" {
        o("--security-opt", "systempaths=unconfined".into());
    }
    if sc["allowPrivilegeEscalation"] == false {
        o("--security-opt", "no-new-privileges".into());
    }
    for cap in sc["capabilities"]["drop"].as_array().into_iter().flatten() {
        o("--cap-drop", cap.as_str().unwrap().into());
    }
    if sc["readOnlyRootFilesystem"] == true {
        opts.push("--read-only".into());
    }
    let mut o = |a: &str, b: String| opts.extend([a.to_string(), b]);
    if let Some(dir) = c["workingDir"].as_str() {
        o("-w", dir.into());
    }
    for e in c["env"].as_array().into_iter().flatten() {
        if let Some(v) = e["value"].as_str() {
            o("-e", format!("{}={v}", e["name"].as_str().unwrap()));
        }
    }
    let mut dirs = std::collections::BTreeMap::new();
    for m in c["volumeMounts"].as_array().unwrap() {
        let at = m["mountPath"].as_str().unwrap().to_string();
        let dir = volume(m["name"].as_str().unwrap());
        if at != "/work" {
            // Only the project is a repository.
            std::fs::remove_dir_all(dir.join(".git")).unwrap();
        }
        o("-v", format!("{}:{at}", dir.display()));
        dirs.insert(at, dir);
    }
    let argv: Vec<String> = c["command"]
        .as_array()
        .unwrap()
        .iter()
        .chain(c["args"].as_array().into_iter().flatten())
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    opts.extend(["--entrypoint".into(), argv[0].clone()]);
    let rest: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    let out = engine.run(&opts, &rest);
    assert!(out.status.success(), "{what}: {}", text(&out));
    let artifacts = &dirs["/out"];
    let patch = std::fs::read_to_string(artifacts.join("changes.patch")).unwrap_or_default();
    assert!(
        patch.contains("+++ b/made-by-agent"),
        "{what}: the agent's file in the patch: {patch}\n{}",
        text(&out)
    );
    assert!(
        !dirs["/work"].join("made-by-agent").exists(),
        "{what}: the project is unchanged"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(artifacts.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(report["level"], expected, "{what}");
    // The readiness probe, run where Kubernetes runs it: in the container, outside jail.
    let probe: Vec<&str> = c["readinessProbe"]["exec"]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let ready = vec![
        "-v".to_string(),
        format!("{}:/ready", dirs["/ready"].display()),
        "--entrypoint".into(),
        format!("/bin/{}", probe[0]),
    ];
    let out = engine.run(&ready, &probe[1..]);
    assert!(out.status.success(), "{what}: readiness: {}", text(&out));
    // And before the command confirmed anything, the probe is not ready.
    std::fs::remove_file(dirs["/ready"].join("status.json")).unwrap();
    assert!(
        !engine.run(&ready, &probe[1..]).status.success(),
        "{what}: not ready before"
    );
    for dir in dirs.values() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The shipped Dockerfile stays within what the legacy builder (DOCKER_BUILDKIT=0) reads: no
/// syntax directive, no RUN --mount, no COPY --link/--chmod/--parents, no heredocs, and its
/// ignore file at the context root (the legacy builder reads no Dockerfile-specific one). Its
/// base images come from a registry, so the engine tests build Dockerfile.scratch instead.
#[test]
fn the_shipped_dockerfile_uses_nothing_only_buildkit_reads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for file in [
        "platform/container/Dockerfile",
        "platform/container/Dockerfile.scratch",
    ] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        for line in text.lines().map(str::trim) {
            let lower = line.to_ascii_lowercase();
            assert!(!lower.starts_with("# syntax="), "{file}: {line}");
            for buildkit_only in ["--mount", "--link", "--chmod", "--parents", "<<"] {
                assert!(
                    !(lower.starts_with("run ")
                        || lower.starts_with("copy ")
                        || lower.starts_with("add "))
                        || !line.contains(buildkit_only),
                    "{file}: {line}"
                );
            }
        }
    }
    assert!(root.join(".dockerignore").is_file());
    assert!(
        !root
            .join("platform/container/Dockerfile.dockerignore")
            .exists()
    );
    let ignore = std::fs::read_to_string(root.join(".dockerignore")).unwrap();
    let dockerfile = std::fs::read_to_string(root.join("platform/container/Dockerfile")).unwrap();
    // Everything the build stage copies is let through.
    for copied in ["Cargo.toml", "Cargo.lock", "build.rs", "src", "profiles"] {
        assert!(dockerfile.contains(copied), "{copied}");
        assert!(
            ignore.lines().any(|l| l == format!("!{copied}")),
            ".dockerignore drops {copied}"
        );
    }
}
