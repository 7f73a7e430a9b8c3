//! Profiles, environment rules, `jail status` and `jail notice`, through the real binary, as root
//! and as an unprivileged user: `jail profile list/show`, every shipped profile run confined (and
//! what each makes writable), profile errors with file, line and column, flags beating the
//! profile (and the dry run saying where each rule came from), the child's environment, the
//! read-only policy file at JAIL_POLICY, status inside/outside/forged, and the notice.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use common::{Fixture, Run, assert_refused, full_level_or_skip, jail_bin, uid_of, users};

/// A PATH every user can search.
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The profiles shipped inside the binary.
const SHIPPED: &[&str] = &[
    "default",
    "review",
    "workspace",
    "ci",
    "opencode",
    "claude-code",
    "codex",
    "gemini-cli",
    "aider",
];

/// Variables from the caller's environment that would change which directories the profiles
/// name, or how much jail logs.
const SCRUBBED: &[&str] = &[
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "XDG_RUNTIME_DIR",
    "CODEX_HOME",
    "GEMINI_CLI_HOME",
    "RUST_LOG",
    "JAIL",
    "JAIL_PROFILE",
    "JAIL_POLICY",
    "GITHUB_TOKEN",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
];

/// A fixture whose commands get a usable PATH and none of the variables above.
fn fixture(who: common::Who, name: &str) -> Fixture {
    Fixture::new(who, name)
        .with_env(&[("PATH", PATH)])
        .scrubbing(SCRUBBED)
}

/// Writes user profiles into `fx/cfg/jail/profiles` (owned by the fixture's user) and returns the
/// XDG_CONFIG_HOME to use.
fn user_profiles(fx: &Fixture, files: &[(&str, &str)]) -> String {
    let dir = fx.dir.join("cfg/jail/profiles");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(format!("{name}.toml")), text).unwrap();
    }
    fx.give_to(fx.who);
    fx.p("cfg")
}

fn profile_file(name: &str) -> String {
    shipped_dir()
        .join(format!("{name}.toml"))
        .to_string_lossy()
        .into_owned()
}

fn shipped_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles")
}

/// The text of a shipped profile, as in the repository.
fn shipped_text(name: &str) -> String {
    std::fs::read_to_string(profile_file(name)).unwrap()
}

fn shipped_description(name: &str) -> String {
    let t: toml::Table = toml::from_str(&shipped_text(name)).unwrap();
    t["description"].as_str().unwrap().to_string()
}

fn json(text: &str, what: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: not JSON ({e}):\n{text}"))
}

#[track_caller]
fn assert_ok(run: &Run, what: &str) {
    assert!(run.ok(), "{what}: failed\n{}", run.describe());
}

/// The child's environment, from `env -0` run inside.
fn child_env(run: &Run) -> BTreeMap<String, String> {
    run.stdout
        .split('\0')
        .filter(|s| !s.is_empty())
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// jail profile list / show

/// The profile names `jail profile list` prints (lines that do not start with blanks).
fn listed(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.is_empty())
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

/// The two lines of one profile in `jail profile list`: "NAME  description" and "  from …".
fn list_entry<'a>(stdout: &'a str, name: &str) -> (&'a str, &'a str) {
    let lines: Vec<&str> = stdout.lines().collect();
    let i = lines
        .iter()
        .position(|l| l.split_whitespace().next() == Some(name) && !l.starts_with(' '))
        .unwrap_or_else(|| panic!("{name} not listed:\n{stdout}"));
    (lines[i], lines.get(i + 1).copied().unwrap_or_default())
}

#[test]
fn profile_list_shows_the_embedded_profiles_and_the_users_own_shadowing_included() {
    if !full_level_or_skip("profile_list") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "plist");
        let cfg = fx.p("cfg"); // does not exist yet: only the embedded profiles
        let run = fx.jail_at(&fx.dir, &["profile", "list"], &[("XDG_CONFIG_HOME", &cfg)]);
        assert_ok(&run, "profile list");
        let mut names = listed(&run.stdout);
        names.sort();
        let mut want: Vec<String> = SHIPPED.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(names, want, "as {who:?}:\n{}", run.stdout);
        for name in SHIPPED {
            let (head, from) = list_entry(&run.stdout, name);
            let description = shipped_description(name);
            assert!(
                head.contains(&description),
                "as {who:?}: {name} listed without its description {description:?}: {head}"
            );
            assert!(from.contains("from embedded"), "{name}: {from}");
        }
        assert!(!run.stdout.contains("shadows"), "{}", run.stdout);

        // The embedded review writes nothing, and nothing is said about shadowing.
        let embedded = fx.sh_at(
            &fx.dir,
            &["-v", "--profile", "review"],
            &format!("echo x > {}/by-review", fx.scratch.display()),
            &[("XDG_CONFIG_HOME", &cfg)],
        );
        assert!(
            !embedded.ok(),
            "embedded review wrote\n{}",
            embedded.describe()
        );
        assert!(!embedded.stderr.contains("shadows"), "{}", embedded.stderr);

        // A profile of the user's own, and one that shadows an embedded one.
        let scratch = fx.scratch.to_string_lossy().into_owned();
        let cfg = user_profiles(
            &fx,
            &[
                (
                    "mine",
                    "description = \"my very own profile\"\nextends = [\"default\"]\n",
                ),
                (
                    "review",
                    &format!(
                        "description = \"my own review, scratch writable\"\nextends = [\"default\"]\n\
                         [paths]\nrw = [\"{scratch}\"]\n"
                    ),
                ),
            ],
        );
        let env = [("XDG_CONFIG_HOME", cfg.as_str())];
        let run = fx.jail_at(&fx.dir, &["profile", "list"], &env);
        assert_ok(&run, "profile list with user profiles");
        assert_eq!(
            listed(&run.stdout).len(),
            SHIPPED.len() + 1,
            "{}",
            run.stdout
        );
        let (head, from) = list_entry(&run.stdout, "mine");
        let mine_file = format!("{cfg}/jail/profiles/mine.toml");
        assert!(head.contains("my very own profile"), "{head}");
        assert!(
            from.contains(&mine_file) && !from.contains("shadows"),
            "as {who:?}: {from}"
        );
        let (head, from) = list_entry(&run.stdout, "review");
        assert!(
            head.contains("my own review, scratch writable")
                && !head.contains(&shipped_description("review")),
            "as {who:?}: {head}"
        );
        assert!(
            from.contains(&format!("{cfg}/jail/profiles/review.toml"))
                && from.contains("shadows the embedded one"),
            "as {who:?}: {from}"
        );
        let (_, from) = list_entry(&run.stdout, "workspace");
        assert!(from.contains("from embedded"), "{from}");

        // A run says so with -v, and the user's file is the one in force.
        let run = fx.sh_at(
            &fx.dir,
            &["-v", "--profile", "review"],
            &format!("echo x > {scratch}/by-review"),
            &env,
        );
        assert_ok(&run, "run under the shadowing review");
        assert!(
            run.stderr.contains("shadows") && run.stderr.contains("review.toml"),
            "as {who:?}: -v does not log the shadowing\n{}",
            run.describe()
        );
        assert!(fx.scratch.join("by-review").exists());
    }
}

#[test]
fn profile_show_prints_the_file_the_resolved_merge_and_json() {
    if !full_level_or_skip("profile_show") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "pshow");
        let cfg = user_profiles(
            &fx,
            &[(
                "mine",
                "# my comment\ndescription = \"mine\"\nextends = [\"claude-code\"]\n\
                 [paths]\nro = [\"/srv/data\"]\n[env]\nkeep = [\"MY_KEY\"]\n",
            )],
        );
        let env = [("XDG_CONFIG_HOME", cfg.as_str())];

        // The TOML text, byte for byte.
        for name in ["review", "claude-code"] {
            let run = fx.jail_at(&fx.dir, &["profile", "show", name], &env);
            assert_ok(&run, "profile show");
            assert_eq!(run.stdout, shipped_text(name), "as {who:?}: show {name}");
        }
        let run = fx.jail_at(&fx.dir, &["profile", "show", "mine"], &env);
        assert!(
            run.ok() && run.stdout.starts_with("# my comment\n"),
            "{}",
            run.describe()
        );

        // --resolved: merged TOML, each rule with the profile it came from.
        let run = fx.jail_at(&fx.dir, &["profile", "show", "mine", "--resolved"], &env);
        assert_ok(&run, "profile show --resolved");
        let text = &run.stdout;
        assert!(
            text.starts_with("# profile mine (resolved: default -> claude-code -> mine)\n"),
            "as {who:?}:\n{text}"
        );
        for line in [
            "\"~/.ssh\",  # default",
            "\"~/.claude\",  # claude-code",
            "\"/srv/data\",  # mine",
        ] {
            assert!(text.contains(line), "as {who:?}: no {line:?} in\n{text}");
        }
        let t: toml::Table = toml::from_str(text)
            .unwrap_or_else(|e| panic!("--resolved is not TOML ({e}):\n{text}"));
        let strings = |v: &toml::Value| -> Vec<String> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(strings(&t["paths"]["rw"]), ["~/.claude"]);
        let ro = strings(&t["paths"]["ro"]);
        assert!(
            ro.ends_with(&["/srv/data".to_string()]) && ro.contains(&"~/.gitconfig".to_string()),
            "{ro:?}"
        );
        assert!(strings(&t["paths"]["hide"]).contains(&"~/.ssh".to_string()));
        let keep = strings(&t["env"]["keep"]);
        assert!(keep.contains(&"ANTHROPIC_API_KEY".into()) && keep.contains(&"MY_KEY".into()));
        assert!(strings(&t["env"]["deny"]).contains(&"*API_KEY*".into()));
        assert_eq!(
            t["env"]["set"]["CLAUDE_CONFIG_DIR"].as_str(),
            Some("~/.claude")
        );
        assert_eq!(t["options"]["allow_unix_sockets"].as_bool(), Some(true));
        assert_eq!(t["options"]["home"].as_str(), Some("hidden"));

        // --json: the resolved profile with its source.
        for args in [
            &["profile", "show", "mine", "--json"][..],
            &["profile", "show", "mine", "--resolved", "--json"][..],
        ] {
            let run = fx.jail_at(&fx.dir, args, &env);
            assert_ok(&run, "profile show --json");
            let v = json(&run.stdout, "show --json");
            assert_eq!(v["name"], "mine");
            assert_eq!(
                v["chain"],
                serde_json::json!(["default", "claude-code", "mine"])
            );
            assert_eq!(v["source"]["kind"], "file");
            assert_eq!(
                v["source"]["path"].as_str(),
                Some(format!("{cfg}/jail/profiles/mine.toml").as_str())
            );
            let paths = v["paths"].as_array().unwrap();
            let find = |t: &str| paths.iter().find(|p| p["template"] == t).cloned();
            assert_eq!(
                find("/srv/data"),
                Some(
                    serde_json::json!({"template": "/srv/data", "access": "ro", "profile": "mine"})
                )
            );
            assert_eq!(
                find("~/.claude"),
                Some(
                    serde_json::json!({"template": "~/.claude", "access": "rw", "profile": "claude-code"})
                )
            );
            assert_eq!(find("~/.ssh").unwrap()["profile"], "default");
            assert!(
                v["env"]["keep"]
                    .as_array()
                    .unwrap()
                    .contains(&"MY_KEY".into())
            );
            assert_eq!(v["env"]["set"]["CLAUDE_CONFIG_DIR"], "~/.claude");
            assert_eq!(v["options"]["allow_unix_sockets"], true);
        }

        let run = fx.jail_at(&fx.dir, &["profile", "show", "nosuch"], &env);
        assert_refused(&run, "show nosuch", &["unknown profile 'nosuch'"]);
    }
}

/// Every shipped profile's `show --resolved --json` parses and builds on default; and its
/// `--resolved` TOML, saved as a user profile, resolves to the same rules.
#[test]
fn every_shipped_profile_round_trips_through_show() {
    if !full_level_or_skip("profile_round_trip") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "prt");
        let mut files = Vec::new();
        let mut resolved = BTreeMap::new();
        let empty_cfg = fx.p("no-cfg");
        for name in SHIPPED {
            let env = [("XDG_CONFIG_HOME", empty_cfg.as_str())];
            let run = fx.jail_at(
                &fx.dir,
                &["profile", "show", name, "--resolved", "--json"],
                &env,
            );
            assert_ok(&run, name);
            let v = json(&run.stdout, name);
            assert_eq!(v["name"], *name);
            assert_eq!(v["source"]["kind"], "embedded");
            assert_eq!(
                v["description"].as_str(),
                Some(shipped_description(name).as_str())
            );
            let chain: Vec<&str> = v["chain"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap())
                .collect();
            if *name == "default" {
                assert_eq!(chain, ["default"]);
            } else {
                assert_eq!(chain[0], "default", "{name}: {chain:?}");
                assert_eq!(chain.last(), Some(name), "{name}: {chain:?}");
            }
            if *name == "ci" {
                assert_eq!(chain, ["default", "workspace", "ci"]);
                assert_eq!(v["env"]["clear"], true);
                assert_eq!(v["options"]["require"], "full");
            }
            for p in v["paths"].as_array().unwrap() {
                assert!(
                    chain.contains(&p["profile"].as_str().unwrap()),
                    "{name}: a rule from outside the chain: {p}"
                );
            }
            let toml_run = fx.jail_at(&fx.dir, &["profile", "show", name, "--resolved"], &env);
            assert_ok(&toml_run, name);
            files.push((format!("rt-{name}"), toml_run.stdout));
            resolved.insert(name.to_string(), v);
        }
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(n, t)| (n.as_str(), t.as_str()))
            .collect();
        let cfg = user_profiles(&fx, &files);
        let rules = |v: &serde_json::Value| -> BTreeSet<(String, String)> {
            v["paths"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    (
                        p["template"].as_str().unwrap().to_string(),
                        p["access"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        };
        for name in SHIPPED {
            let rt = format!("rt-{name}");
            let run = fx.jail_at(
                &fx.dir,
                &["profile", "show", &rt, "--resolved", "--json"],
                &[("XDG_CONFIG_HOME", &cfg)],
            );
            assert_ok(&run, &rt);
            let back = json(&run.stdout, &rt);
            let orig = &resolved[*name];
            assert_eq!(rules(&back), rules(orig), "as {who:?}: {name} rules");
            assert_eq!(back["env"], orig["env"], "{name} env");
            assert_eq!(back["options"], orig["options"], "{name} options");
            // The keys the proxy adds, with their hosts (the declaring profile is the copy).
            let secrets = |v: &serde_json::Value| -> BTreeMap<String, serde_json::Value> {
                v["secrets"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .map(|(k, s)| (k.clone(), s["hosts"].clone()))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            assert_eq!(secrets(&back), secrets(orig), "{name} secrets");
            if ["claude-code", "codex", "gemini-cli", "aider", "opencode"].contains(name) {
                assert!(!secrets(orig).is_empty(), "{name} declares no secrets");
            }
            assert_eq!(
                back["description"], orig["description"],
                "{name} description"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The shipped profiles, run

#[test]
fn every_shipped_profile_runs_confined() {
    if !full_level_or_skip("shipped_profiles_run") {
        return;
    }
    let script = "echo P=$JAIL_PROFILE; \
                  if (echo x > ./w-probe) 2>/dev/null; then echo CWD=rw; else echo CWD=ro; fi; \
                  if (echo x > \"$HOME/h-probe\") 2>/dev/null; then echo HOME=rw; else echo HOME=ro; fi; \
                  if (echo x > /tmp/t-probe) 2>/dev/null; then echo TMP=rw; else echo TMP=ro; fi";
    for who in users() {
        let fx = fixture(who, "prun");
        for name in SHIPPED {
            let run = fx.jail_at(&fx.repo, &["--profile", name, "--", "/bin/true"], &[]);
            assert_eq!(
                run.code,
                Some(0),
                "as {who:?}: --profile {name} -- /bin/true\n{}",
                run.describe()
            );
            let run = fx.sh_at(&fx.repo, &["--profile", name], script, &[]);
            assert_ok(&run, name);
            let cwd_writable = matches!(*name, "workspace" | "ci");
            let want = format!(
                "P={name}\nCWD={}\nHOME=ro\nTMP=rw\n",
                if cwd_writable { "rw" } else { "ro" }
            );
            assert_eq!(
                run.stdout,
                want,
                "as {who:?}: --profile {name}\n{}",
                run.describe()
            );
            assert_eq!(fx.repo.join("w-probe").exists(), cwd_writable, "{name}");
            assert!(!fx.home.join("h-probe").exists(), "{name} wrote HOME");
            let _ = std::fs::remove_file(fx.repo.join("w-probe"));
        }
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("file.txt")).unwrap(),
            "original\n"
        );
    }
}

/// `ci` requires every layer: with one off it refuses, where `workspace` runs.
#[test]
fn ci_profile_requires_the_full_level() {
    if !full_level_or_skip("ci_requires_full") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "pci");
        let off = [("JAIL_TEST_DISABLE", "landlock")];
        let run = fx.jail_at(&fx.repo, &["--profile", "ci", "--", "echo", "RAN"], &off);
        assert_eq!(
            run.code,
            Some(125),
            "as {who:?}: ci ran without landlock\n{}",
            run.describe()
        );
        assert!(!run.stdout.contains("RAN") && run.stderr.contains("'full' not met"));
        let run = fx.jail_at(
            &fx.repo,
            &["--profile", "workspace", "--", "echo", "RAN"],
            &off,
        );
        assert!(run.ok() && run.stdout.contains("RAN"), "{}", run.describe());
    }
}

#[test]
fn agent_profiles_create_their_state_dirs_and_only_those_are_writable() {
    if !full_level_or_skip("agent_state_dirs") {
        return;
    }
    let table: &[(&str, &[&str])] = &[
        ("claude-code", &[".claude"]),
        (
            "opencode",
            &[
                ".config/opencode",
                ".local/share/opencode",
                ".local/state/opencode",
                ".cache/opencode",
            ],
        ),
        ("codex", &[".codex"]),
        ("gemini-cli", &[".gemini"]),
        ("aider", &[".aider"]),
    ];
    for who in users() {
        let fx = fixture(who, "pagent");
        // Somebody else's state dir, present: it stays read-only under every agent profile.
        std::fs::create_dir_all(fx.home.join(".notmine")).unwrap();
        fx.give_to(who);
        for (profile, dirs) in table {
            for d in *dirs {
                assert!(!fx.home.join(d).exists(), "{profile}: {d} exists already");
            }
            // A dry run creates nothing, and lists what a run would create.
            let run = fx.jail_at(
                &fx.dir,
                &["--profile", profile, "--dry-run", "--", "true"],
                &[],
            );
            assert_ok(&run, "dry run");
            let v = json(&run.stdout, "dry run");
            let missing: Vec<String> = v["policy"]["profile_rw_missing"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap().to_string())
                .collect();
            for d in *dirs {
                assert!(
                    !fx.home.join(d).exists(),
                    "{profile}: the dry run created {d}"
                );
                let full = fx.home.join(d).to_string_lossy().into_owned();
                assert!(
                    missing.contains(&full),
                    "{profile}: {full} not in {missing:?}"
                );
            }

            let run = fx.jail_at(&fx.dir, &["--profile", profile, "--", "true"], &[]);
            assert_ok(&run, profile);
            for d in *dirs {
                let p = fx.home.join(d);
                let meta = std::fs::metadata(&p).unwrap_or_else(|_| {
                    panic!("as {who:?}: --profile {profile} did not create ~/{d}")
                });
                assert!(meta.is_dir(), "{}", p.display());
                assert_eq!(meta.uid(), uid_of(who), "~/{d} owner");
                assert_eq!(meta.mode() & 0o077, 0, "~/{d} is open to others");
            }

            // A data file each state directory's profile names (the rest of the directory is
            // code: moved aside when created, tests/planted.rs).
            let data = |d: &str| match d {
                ".config/opencode" => ".gitignore",
                ".local/share/opencode" => "opencode.db",
                ".local/state/opencode" => "kv.json",
                ".cache/opencode" => "models.json",
                ".aider" => "installs.json",
                ".gemini" => "projects.json",
                _ => "history.jsonl",
            };
            let mut script = String::new();
            for d in dirs.iter() {
                script.push_str(&format!(
                    "if (echo x > \"$HOME/{d}/{}\") 2>/dev/null; then echo OK {d}; else echo NO {d}; fi; ",
                    data(d)
                ));
            }
            for other in ["other", ".notmine/x", ".config/other-app"] {
                script.push_str(&format!(
                    "if (echo x > \"$HOME/{other}\") 2>/dev/null; then echo OK {other}; else echo NO {other}; fi; "
                ));
            }
            let run = fx.sh_at(&fx.dir, &["--profile", profile], &script, &[]);
            assert_ok(&run, profile);
            for d in *dirs {
                assert!(
                    run.stdout.contains(&format!("OK {d}\n")),
                    "as {who:?}: --profile {profile} cannot write ~/{d}\n{}",
                    run.describe()
                );
            }
            for other in ["other", ".notmine/x", ".config/other-app"] {
                assert!(
                    run.stdout.contains(&format!("NO {other}\n")),
                    "as {who:?}: --profile {profile} wrote ~/{other}\n{}",
                    run.describe()
                );
                assert!(!fx.home.join(other).exists());
            }
            for d in dirs.iter() {
                assert!(fx.home.join(d).join(data(d)).exists());
            }
        }
    }
}

#[test]
fn review_profile_writes_nothing_but_tmp_and_points_caches_there() {
    if !full_level_or_skip("review_profile") {
        return;
    }
    let script = "if (echo x > ./new.txt) 2>/dev/null; then echo CWD=rw; else echo CWD=ro; fi; \
                  if (echo x >> ./file.txt) 2>/dev/null; then echo FILE=rw; else echo FILE=ro; fi; \
                  mkdir -p \"$CARGO_TARGET_DIR\" \"$PYTHONPYCACHEPREFIX\" \"$GOCACHE\" && \
                  echo built > \"$CARGO_TARGET_DIR/out\" && echo CACHE=$(cat \"$CARGO_TARGET_DIR/out\"); \
                  echo T=$CARGO_TARGET_DIR; echo I=$CARGO_INCREMENTAL; echo B=$PYTHONDONTWRITEBYTECODE; \
                  echo X=$XDG_CACHE_HOME";
    for who in users() {
        let fx = fixture(who, "preview");
        let run = fx.sh_at(&fx.repo, &["--profile", "review"], script, &[]);
        assert_ok(&run, "review");
        assert_eq!(
            run.stdout,
            "CWD=ro\nFILE=ro\nCACHE=built\nT=/tmp/jail-cache/cargo-target\nI=0\nB=1\n\
             X=/tmp/jail-cache/xdg\n",
            "as {who:?}\n{}",
            run.describe()
        );
        assert!(!fx.repo.join("new.txt").exists());
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("file.txt")).unwrap(),
            "original\n"
        );
    }
}

#[test]
fn workspace_profile_writes_the_cwd_but_not_git_hooks_or_config() {
    if !full_level_or_skip("workspace_profile") {
        return;
    }
    let script = "for f in new.txt file.txt src/added.rs .git/hooks/pre-commit .git/hooks/post-checkout .git/config; do \
                    if (echo planted >> \"$f\") 2>/dev/null; then echo \"OK $f\"; else echo \"NO $f\"; fi; \
                  done";
    for who in users() {
        let fx = fixture(who, "pwork");
        std::fs::create_dir_all(fx.repo.join(".git/hooks")).unwrap();
        std::fs::write(fx.repo.join(".git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::write(fx.repo.join(".git/config"), "[core]\n").unwrap();
        fx.give_to(who);
        let run = fx.sh_at(&fx.repo, &["--profile", "workspace"], script, &[]);
        assert_ok(&run, "workspace");
        assert_eq!(
            run.stdout,
            "OK new.txt\nOK file.txt\nOK src/added.rs\nNO .git/hooks/pre-commit\n\
             NO .git/hooks/post-checkout\nNO .git/config\n",
            "as {who:?}\n{}",
            run.describe()
        );
        assert_eq!(
            std::fs::read_to_string(fx.repo.join("file.txt")).unwrap(),
            "original\nplanted\n"
        );
        assert_eq!(
            std::fs::read_to_string(fx.repo.join(".git/hooks/pre-commit")).unwrap(),
            "#!/bin/sh\nexit 0\n"
        );
        assert!(!fx.repo.join(".git/hooks/post-checkout").exists());
        assert_eq!(
            std::fs::read_to_string(fx.repo.join(".git/config")).unwrap(),
            "[core]\n"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Errors

#[test]
fn profile_errors_name_the_file_line_and_column() {
    if !full_level_or_skip("profile_errors") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "perr");
        let cfg = user_profiles(
            &fx,
            &[
                (
                    "unknown-key",
                    "description = \"x\"\nextends = [\"default\"]\n[paths]\nrw = []\nwritable = [\"/srv\"]\n",
                ),
                ("malformed", "description = \"x\"\n[paths\nro = 1\n"),
                ("orphan", "description = \"x\"\nextends = [\"nope\"]\n"),
                ("cyc-a", "extends = [\"cyc-b\"]\n"),
                ("cyc-b", "# b\n\nextends = [\"cyc-a\"]\n"),
                ("self", "extends = [\"self\"]\n"),
                ("badtmp", "[options]\ntmp = \"shared\"\n"),
                (
                    "rel",
                    "extends = [\"default\"]\n[paths]\nrw = [\"scratch\"]\n",
                ),
            ],
        );
        let dir = format!("{cfg}/jail/profiles");
        let env = [("XDG_CONFIG_HOME", cfg.as_str())];
        let cases: &[(&str, Vec<String>)] = &[
            (
                "unknown-key",
                vec![
                    format!("{dir}/unknown-key.toml:5:1"),
                    "unknown field `writable`".into(),
                ],
            ),
            ("malformed", vec![format!("{dir}/malformed.toml:2:")]),
            (
                "orphan",
                vec![
                    format!("{dir}/orphan.toml:2:12"),
                    "unknown profile 'nope'".into(),
                ],
            ),
            (
                "cyc-a",
                vec![
                    format!("{dir}/cyc-b.toml:3:12"),
                    "cycle cyc-a -> cyc-b -> cyc-a".into(),
                ],
            ),
            (
                "self",
                vec![format!("{dir}/self.toml:1:12"), "cycle self -> self".into()],
            ),
            ("badtmp", vec![format!("{dir}/badtmp.toml:2:7")]),
            (
                "rel",
                vec!["rel".into(), "'scratch' is not absolute".into()],
            ),
        ];
        for (name, needles) in cases {
            let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
            let run = fx.jail_at(&fx.dir, &["--profile", name, "--", "echo", "RAN"], &env);
            assert_refused(&run, &format!("as {who:?}: --profile {name}"), &needles);
            if *name != "rel" {
                // show resolves too: the same error.
                let run = fx.jail_at(&fx.dir, &["profile", "show", name, "--resolved"], &env);
                assert_refused(&run, &format!("as {who:?}: profile show {name}"), &needles);
            }
        }
        let run = fx.jail_at(&fx.dir, &["--profile", "nosuch", "--", "echo", "RAN"], &env);
        assert_refused(
            &run,
            "--profile nosuch",
            &["unknown profile 'nosuch'", "default"],
        );
        // A broken file does not take the others down.
        let run = fx.jail_at(
            &fx.dir,
            &["--profile", "default", "--", "echo", "RAN"],
            &env,
        );
        assert!(run.ok() && run.stdout == "RAN\n", "{}", run.describe());
    }
}

/// BUG: a relative path in a profile is refused (exit 125), but the message names neither the
/// file nor the line and column, unlike every other profile error.
#[test]

fn relative_path_error_names_the_file_line_and_column() {
    if !full_level_or_skip("relative_path_location") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "prel");
        let cfg = user_profiles(
            &fx,
            &[(
                "rel",
                "extends = [\"default\"]\n[paths]\nrw = [\"scratch\"]\n",
            )],
        );
        let run = fx.jail_at(
            &fx.dir,
            &["--profile", "rel", "--", "echo", "RAN"],
            &[("XDG_CONFIG_HOME", &cfg)],
        );
        assert_refused(
            &run,
            "relative path",
            &[&format!("{cfg}/jail/profiles/rel.toml:3:"), "scratch"],
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Flags against the profile, and origins

#[test]
fn flags_beat_the_profile_and_the_dry_run_names_each_rules_origin() {
    if !full_level_or_skip("flags_beat_profile") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "pflags");
        let flagrw = fx.dir.join("flagrw");
        std::fs::create_dir_all(flagrw.join(".git/hooks")).unwrap();
        let (scratch, sub, src, flagrw_s) = (
            fx.scratch.to_string_lossy().into_owned(),
            fx.repo.join("sub").to_string_lossy().into_owned(),
            fx.repo.join("src").to_string_lossy().into_owned(),
            flagrw.to_string_lossy().into_owned(),
        );
        let cfg = user_profiles(
            &fx,
            &[(
                "mine",
                &format!(
                    "extends = [\"default\"]\n[paths]\nrw = [\"{scratch}\", \"{sub}\"]\nhide = [\"{src}\"]\n"
                ),
            )],
        );
        let env = [("XDG_CONFIG_HOME", cfg.as_str())];
        let script = format!(
            "if (echo x > {scratch}/a) 2>/dev/null; then echo scratch=rw; else echo scratch=ro; fi; \
             if (echo x > {sub}/b) 2>/dev/null; then echo sub=rw; else echo sub=ro; fi; \
             if (echo x > {flagrw_s}/c) 2>/dev/null; then echo flagrw=rw; else echo flagrw=ro; fi; \
             if (echo x > {flagrw_s}/.git/hooks/d) 2>/dev/null; then echo hooks=rw; else echo hooks=ro; fi; \
             if cat {src}/main.rs >/dev/null 2>&1; then echo src=visible; else echo src=hidden; fi"
        );

        // The profile alone: scratch writable, src hidden.
        let run = fx.sh_at(&fx.dir, &["--profile", "mine"], &script, &env);
        assert_ok(&run, "profile alone");
        assert_eq!(
            run.stdout,
            "scratch=rw\nsub=rw\nflagrw=ro\nhooks=ro\nsrc=hidden\n",
            "as {who:?}\n{}",
            run.describe()
        );
        std::fs::remove_file(fx.scratch.join("a")).unwrap();
        std::fs::remove_file(fx.repo.join("sub/b")).unwrap();

        // Flags naming the same paths win.
        let flags = [
            "--profile",
            "mine",
            "--ro",
            &scratch,
            "--ro",
            &src,
            "--rw",
            &flagrw_s,
        ];
        let run = fx.sh_at(&fx.dir, &flags, &script, &env);
        assert_ok(&run, "flags");
        assert_eq!(
            run.stdout,
            "scratch=ro\nsub=rw\nflagrw=rw\nhooks=ro\nsrc=visible\n",
            "as {who:?}: the flags did not beat the profile\n{}",
            run.describe()
        );
        assert!(!fx.scratch.join("a").exists());
        assert!(flagrw.join("c").exists() && !flagrw.join(".git/hooks/d").exists());

        // The dry run says where each rule came from.
        // (HOME visible, so the default's hide rule in it is a rule of its own.)
        let mut args = flags.to_vec();
        args.extend(["--home", "visible", "--dry-run", "--", "true"]);
        let run = fx.jail_at(&fx.dir, &args, &env);
        assert_ok(&run, "dry run");
        let v = json(&run.stdout, "dry run");
        assert_eq!(v["policy"]["profile"], "mine");
        let rules = v["policy"]["rules"].as_array().unwrap();
        let rule = |path: &str| {
            rules
                .iter()
                .find(|r| r["path"] == path)
                .unwrap_or_else(|| panic!("no rule for {path} in {rules:#?}"))
        };
        let origin = |from: &str, detail: &str| serde_json::json!({"from": from, "detail": detail});
        let hooks = flagrw.join(".git/hooks").to_string_lossy().into_owned();
        let ssh = fx.home.join(".ssh").to_string_lossy().into_owned();
        for (path, access, want) in [
            (scratch.as_str(), "ro", origin("flag", "--ro")),
            (src.as_str(), "ro", origin("flag", "--ro")),
            (sub.as_str(), "rw", origin("profile", "mine")),
            (flagrw_s.as_str(), "rw", origin("flag", "--rw")),
            (hooks.as_str(), "ro", origin("protected", &flagrw_s)),
            (ssh.as_str(), "hide", origin("profile", "default")),
        ] {
            let r = rule(path);
            assert_eq!(r["access"], access, "as {who:?}: {path}: {r}");
            assert_eq!(r["origin"], want, "as {who:?}: {path}: {r}");
        }
        assert_eq!(rule("/")["origin"], serde_json::json!({"from": "default"}));
        assert_eq!(
            rules
                .iter()
                .filter(|r| r["path"] == scratch.as_str())
                .count(),
            1,
            "one rule per path"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Environment

const SECRET_ENV: &[(&str, &str)] = &[
    ("GITHUB_TOKEN", "ghp_value-GITHUB-1234"),
    ("AWS_SECRET_ACCESS_KEY", "value-AWS-5678"),
    ("FOO_API_KEY", "value-FOO-9012"),
    ("ANTHROPIC_API_KEY", "value-ANTHROPIC-3456"),
    ("OPENAI_API_KEY", "value-OPENAI-7890"),
    ("MY_VAR", "value-MY-VAR"),
    ("KEEP_ME", "plain-value"),
];

fn env_with(fx: &Fixture, extra: &[(&'static str, &'static str)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = SECRET_ENV
        .iter()
        .chain(extra)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.push(("SSH_AUTH_SOCK".into(), fx.p("agent.sock")));
    env
}

fn env_run(
    fx: &Fixture,
    dir: &Path,
    flags: &[&str],
    env: &[(String, String)],
) -> BTreeMap<String, String> {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut args = flags.to_vec();
    args.extend(["--", "/usr/bin/env", "-0"]);
    let run = fx.jail_at(dir, &args, &env);
    assert_ok(&run, &format!("{flags:?}"));
    child_env(&run)
}

#[test]
fn the_environment_loses_secrets_by_default_and_flags_and_profiles_adjust_it() {
    if !full_level_or_skip("environment") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "penv");
        let home = fx.home.to_string_lossy().into_owned();
        let env = env_with(&fx, &[]);
        let jail_vars = |e: &BTreeMap<String, String>, profile: &str| {
            assert_eq!(e.get("JAIL").map(String::as_str), Some("1"), "{e:?}");
            assert_eq!(e.get("JAIL_PROFILE").map(String::as_str), Some(profile));
            assert!(e.get("JAIL_POLICY").is_some_and(|p| !p.is_empty()), "{e:?}");
        };

        // Default: secrets gone, the rest kept.
        let e = env_run(&fx, &fx.dir, &[], &env);
        for gone in [
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "FOO_API_KEY",
            "SSH_AUTH_SOCK",
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
        ] {
            assert!(
                !e.contains_key(gone),
                "as {who:?}: {gone} reached the command: {e:?}"
            );
        }
        assert_eq!(e.get("PATH").map(String::as_str), Some(PATH));
        assert_eq!(e.get("HOME"), Some(&home));
        assert_eq!(e.get("MY_VAR").map(String::as_str), Some("value-MY-VAR"));
        assert_eq!(e.get("KEEP_ME").map(String::as_str), Some("plain-value"));
        jail_vars(&e, "default");

        // An agent profile keeps its own key, not the others'.
        let e = env_run(&fx, &fx.dir, &["--profile", "claude-code"], &env);
        assert_eq!(
            e.get("ANTHROPIC_API_KEY").map(String::as_str),
            Some("value-ANTHROPIC-3456"),
            "as {who:?}: {e:?}"
        );
        for gone in ["OPENAI_API_KEY", "GITHUB_TOKEN", "FOO_API_KEY"] {
            assert!(!e.contains_key(gone), "as {who:?}: claude-code kept {gone}");
        }
        assert_eq!(e.get("CLAUDE_CONFIG_DIR"), Some(&format!("{home}/.claude")));
        jail_vars(&e, "claude-code");

        // --env KEY keeps, --env KEY=VALUE sets, --env-deny removes.
        let e = env_run(
            &fx,
            &fx.dir,
            &[
                "--env",
                "GITHUB_TOKEN",
                "--env",
                "X=1",
                "--env-deny",
                "MY_*",
            ],
            &env,
        );
        assert_eq!(
            e.get("GITHUB_TOKEN").map(String::as_str),
            Some("ghp_value-GITHUB-1234"),
            "as {who:?}: {e:?}"
        );
        assert_eq!(e.get("X").map(String::as_str), Some("1"));
        assert!(!e.contains_key("MY_VAR"), "--env-deny MY_*: {e:?}");
        assert!(!e.contains_key("AWS_SECRET_ACCESS_KEY"));
        assert_eq!(e.get("KEEP_ME").map(String::as_str), Some("plain-value"));

        // --env-clear: only jail's own and the --env additions.
        let e = env_run(&fx, &fx.dir, &["--env-clear", "--env", "X=1"], &env);
        let names: Vec<&str> = e.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["JAIL", "JAIL_POLICY", "JAIL_PROFILE", "X"],
            "as {who:?}: {e:?}"
        );
        let e = env_run(
            &fx,
            &fx.dir,
            &["--env-clear", "--env", "KEEP_ME", "--env", "GITHUB_TOKEN"],
            &env,
        );
        let names: Vec<&str> = e.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "GITHUB_TOKEN",
                "JAIL",
                "JAIL_POLICY",
                "JAIL_PROFILE",
                "KEEP_ME"
            ],
            "{e:?}"
        );

        // ci: cleared but for its keep list.
        let env = env_with(
            &fx,
            &[
                ("CI", "true"),
                ("LC_ALL", "C"),
                ("LANG", "C"),
                ("FOO", "bar"),
                ("TERM", "dumb"),
            ],
        );
        let e = env_run(&fx, &fx.repo, &["--profile", "ci"], &env);
        let keep = [
            "PATH",
            "HOME",
            "USER",
            "LOGNAME",
            "LANG",
            "TERM",
            "TZ",
            "TMPDIR",
            "CI",
            "SHELL",
            "JAIL",
            "JAIL_PROFILE",
            "JAIL_POLICY",
        ];
        for k in e.keys() {
            assert!(
                keep.contains(&k.as_str()) || k.starts_with("LC_"),
                "as {who:?}: ci passed {k}: {e:?}"
            );
        }
        for k in ["PATH", "HOME", "CI", "LC_ALL", "LANG", "TERM"] {
            assert!(e.contains_key(k), "as {who:?}: ci dropped {k}: {e:?}");
        }
        assert_eq!(e.get("CI").map(String::as_str), Some("true"));
        jail_vars(&e, "ci");
    }
}

/// Names of secrets may appear in the dry run and the policy file; their values never.
#[test]
fn no_secret_value_reaches_the_dry_run_or_the_policy_file() {
    if !full_level_or_skip("no_secret_values") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "psecret");
        let env = env_with(&fx, &[]);
        let envr: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let flags = [
            "--profile",
            "claude-code",
            "--env",
            "GITHUB_TOKEN",
            "--env",
            "SET_BY_FLAG=value-SET-BY-FLAG",
        ];
        let mut args = flags.to_vec();
        args.extend(["--dry-run", "--", "true"]);
        let run = fx.jail_at(&fx.dir, &args, &envr);
        assert_ok(&run, "dry run");
        let v = json(&run.stdout, "dry run");
        for (name, value) in SECRET_ENV
            .iter()
            .chain(&[("SET_BY_FLAG", "value-SET-BY-FLAG")])
        {
            assert!(
                !run.stdout.contains(value),
                "as {who:?}: the dry run shows the value of {name}"
            );
        }
        let strings = |v: &serde_json::Value| -> Vec<String> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect()
        };
        let removed = strings(&v["policy"]["env"]["removed"]);
        for name in [
            "AWS_SECRET_ACCESS_KEY",
            "FOO_API_KEY",
            "OPENAI_API_KEY",
            "SSH_AUTH_SOCK",
        ] {
            assert!(
                removed.contains(&name.to_string()),
                "{name} not in {removed:?}"
            );
        }
        for name in ["GITHUB_TOKEN", "ANTHROPIC_API_KEY", "MY_VAR"] {
            assert!(
                !removed.contains(&name.to_string()),
                "{name} in {removed:?}"
            );
        }
        let set = strings(&v["policy"]["env"]["set"]);
        assert!(
            set.contains(&"SET_BY_FLAG".into()) && set.contains(&"CLAUDE_CONFIG_DIR".into()),
            "{set:?}"
        );

        // The policy file inside, and that the values did reach the command.
        let mut args = flags.to_vec();
        args.extend([
            "--",
            "/bin/sh",
            "-c",
            "cat \"$JAIL_POLICY\"; echo; echo \"==$GITHUB_TOKEN==$ANTHROPIC_API_KEY==$SET_BY_FLAG\"",
        ]);
        let run = fx.jail_at(&fx.dir, &args, &envr);
        assert_ok(&run, "policy file");
        let (policy, tail) = run.stdout.rsplit_once("\n==").unwrap();
        assert_eq!(
            tail, "ghp_value-GITHUB-1234==value-ANTHROPIC-3456==value-SET-BY-FLAG\n",
            "as {who:?}"
        );
        json(policy, "policy file");
        for (name, value) in SECRET_ENV
            .iter()
            .chain(&[("SET_BY_FLAG", "value-SET-BY-FLAG")])
        {
            assert!(
                !policy.contains(value),
                "as {who:?}: the policy file shows the value of {name}"
            );
        }
    }
}

#[test]
fn the_policy_file_is_json_readable_and_not_writable_from_inside() {
    if !full_level_or_skip("policy_file") {
        return;
    }
    let script = "cat \"$JAIL_POLICY\"; echo '=====' ; \
                  (echo x >> \"$JAIL_POLICY\") 2>/dev/null && echo APPENDED; \
                  (: > \"$JAIL_POLICY\") 2>/dev/null && echo TRUNCATED; \
                  chmod 666 \"$JAIL_POLICY\" 2>/dev/null; (echo x >> \"$JAIL_POLICY\") 2>/dev/null && echo APPENDED2; \
                  echo '=====' ; cat \"$JAIL_POLICY\"";
    for who in users() {
        let fx = fixture(who, "ppol");
        for (profile, disable, level) in [
            ("default", "", "full"),
            ("claude-code", "", "full"),
            ("default", "mount", "partial"),
        ] {
            let run = fx.sh_at(
                &fx.dir,
                &["--profile", profile],
                script,
                &[("JAIL_TEST_DISABLE", disable)],
            );
            assert_ok(&run, profile);
            let parts: Vec<&str> = run.stdout.split("=====\n").collect();
            assert_eq!(parts.len(), 3, "as {who:?}: {}", run.describe());
            assert_eq!(
                parts[1],
                "",
                "as {who:?}, --profile {profile}, disabled {disable:?}: the policy file could be written\n{}",
                run.describe()
            );
            assert_eq!(parts[0], parts[2], "the policy file changed");
            let v = json(parts[0], "policy file");
            assert_eq!(v["version"], 1);
            assert_eq!(v["profile"], profile);
            assert_eq!(v["level"], level, "{v}");
            assert_eq!(v["policy"]["profile"], profile);
            if profile == "claude-code" {
                let claude = fx.home.join(".claude").to_string_lossy().into_owned();
                assert!(
                    v["writable"]
                        .as_array()
                        .unwrap()
                        .contains(&claude.as_str().into()),
                    "{v}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// jail status

/// A copy of a real policy file, owned by the fixture's user, mode 0444.
fn forged_policy(fx: &Fixture) -> String {
    let run = fx.sh_at(&fx.dir, &[], "cat \"$JAIL_POLICY\"", &[]);
    assert_ok(&run, "read the policy file");
    json(&run.stdout, "policy file");
    let path = fx.dir.join("forged-policy.json");
    std::fs::write(&path, &run.stdout).unwrap();
    fx.give_to(fx.who);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn status_inside_and_outside_a_jail_and_not_fooled_by_a_forged_variable() {
    if !full_level_or_skip("status") {
        return;
    }
    let bin = jail_bin().to_string_lossy().into_owned();
    for who in users() {
        let fx = fixture(who, "pstat");

        let run = fx.jail_at(&fx.dir, &["--", &bin, "status"], &[]);
        assert_eq!(
            run.code,
            Some(0),
            "as {who:?}: status inside\n{}",
            run.describe()
        );
        assert!(
            run.stdout
                .contains("inside a jail: level full, profile default"),
            "{}",
            run.describe()
        );

        let run = fx.jail_at(
            &fx.dir,
            &["--profile", "claude-code", "--", &bin, "status", "--json"],
            &[],
        );
        assert_eq!(
            run.code,
            Some(0),
            "as {who:?}: status --json inside\n{}",
            run.describe()
        );
        let v = json(&run.stdout, "status --json");
        assert_eq!(v["inside"], true);
        assert_eq!(v["policy"]["profile"], "claude-code");
        assert_eq!(v["policy"]["level"], "full");
        let claude = fx.home.join(".claude").to_string_lossy().into_owned();
        assert!(
            v["policy"]["writable"]
                .as_array()
                .unwrap()
                .contains(&claude.as_str().into())
        );
        assert!(
            v["checks"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| c["ok"] == true),
            "{v}"
        );

        // Outside.
        let run = fx.jail_at(&fx.dir, &["status"], &[]);
        assert_eq!(
            run.code,
            Some(1),
            "as {who:?}: status outside\n{}",
            run.describe()
        );
        assert!(
            run.stdout.contains("not inside a jail"),
            "{}",
            run.describe()
        );
        let run = fx.jail_at(&fx.dir, &["status", "--json"], &[]);
        assert_eq!(run.code, Some(1));
        let v = json(&run.stdout, "status --json outside");
        assert_eq!(
            (v["inside"].clone(), v["policy"].clone()),
            (false.into(), serde_json::Value::Null)
        );

        // Outside, with the variables forged from a real policy file.
        let forged = forged_policy(&fx);
        let env = [
            ("JAIL", "1"),
            ("JAIL_PROFILE", "default"),
            ("JAIL_POLICY", forged.as_str()),
        ];
        let run = fx.jail_at(&fx.dir, &["status"], &env);
        assert_eq!(
            run.code,
            Some(1),
            "as {who:?}: a forged JAIL_POLICY fooled status\n{}",
            run.describe()
        );
        assert!(
            run.stdout.contains("not inside a jail"),
            "{}",
            run.describe()
        );
        let run = fx.jail_at(&fx.dir, &["status", "--json"], &env);
        assert_eq!(run.code, Some(1));
        let v = json(&run.stdout, "forged status --json");
        assert_eq!(v["inside"], false);
        assert!(v["policy"].is_null(), "{v}");

        // The fallback (no mount view): still inside, level partial, but only advisory (exit
        // 2): its sealed memfd is something any process can make.
        let off = [("JAIL_TEST_DISABLE", "mount")];
        let run = fx.jail_at(&fx.dir, &["--", &bin, "status"], &off);
        assert_eq!(
            run.code,
            Some(2),
            "as {who:?}: status in the fallback\n{}",
            run.describe()
        );
        assert!(
            run.stdout.contains("inside a jail: level partial"),
            "{}",
            run.describe()
        );
        let run = fx.jail_at(&fx.dir, &["--", &bin, "status", "--json"], &off);
        assert_eq!(run.code, Some(2), "{}", run.describe());
        let v = json(&run.stdout, "fallback status --json");
        assert_eq!(v["inside"], true);
        assert_eq!(v["policy"]["level"], "partial");
        assert_eq!(v["policy"]["layers"]["mount"], false);
    }
}

/// Once a bug: outside any jail, an unprivileged process under an unrelated seccomp filter with
/// no_new_privs (any systemd unit with SystemCallFilter=, Docker's default profile with
/// no-new-privileges, a browser sandbox…) and a copy of a policy file (mode 0444) is reported
/// "inside a jail", exit 0: the write probe in / fails for any non-root user by plain file
/// permissions, and nothing checked Landlock or the mount view. Now the copy is not jail's file
/// (it claims the mount view), and the effects are checked, as root too.
#[test]
fn status_is_not_fooled_by_a_forged_policy_under_an_unrelated_seccomp_filter() {
    if !full_level_or_skip("status_forged_seccomp") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "pforge");
        // tests/helpers/forge.c: no_new_privs, an allow-all filter, "-": no memfd of its own.
        let bin = common::compile_helper("forge");
        let forged = forged_policy(&fx);
        let jail_path = jail_bin().to_string_lossy().into_owned();
        let mut cmd = fx.command(&bin, &["allow", "-", &jail_path, "status"]);
        cmd.env("JAIL", "1").env("JAIL_POLICY", &forged);
        let run = Run::from(cmd.output().expect("run the forge"));
        assert_eq!(
            run.code,
            Some(1),
            "outside a jail, status says inside:\n{}",
            run.describe()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// jail notice

#[track_caller]
fn assert_two_sentences(text: &str) {
    let text = text.trim_end();
    assert_eq!(
        text.matches(". ").count() + 1,
        2,
        "not two sentences: {text}"
    );
    assert!(text.ends_with('.'), "{text}");
    assert!(
        text.contains("read-only") && text.contains("hand-off"),
        "{text}"
    );
}

#[test]
fn notice_outside_inside_and_before_a_run() {
    if !full_level_or_skip("notice") {
        return;
    }
    let bin = jail_bin().to_string_lossy().into_owned();
    for who in users() {
        let fx = fixture(who, "pnotice");
        let scratch = fx.scratch.to_string_lossy().into_owned();
        let repo = fx.repo.to_string_lossy().into_owned();

        let run = fx.jail_at(&fx.dir, &["notice"], &[]);
        assert_ok(&run, "notice outside");
        assert_two_sentences(&run.stdout);
        assert!(
            run.stdout.contains("profile default")
                && run
                    .stdout
                    .contains("every file is read-only except a private /tmp"),
            "as {who:?}: {}",
            run.stdout
        );

        // A project with a .git/hooks directory: the notice says it stays read-only.
        std::fs::create_dir_all(fx.repo.join(".git/hooks")).unwrap();
        fx.give_to(who);
        let run = fx.jail_at(&fx.repo, &["notice", "--profile", "workspace"], &[]);
        assert_ok(&run, "notice --profile workspace");
        assert_two_sentences(&run.stdout);
        assert!(
            run.stdout
                .contains(&format!("only {repo} and a private /tmp can be written"))
                && run.stdout.contains(".git/hooks"),
            "as {who:?}: {}",
            run.stdout
        );

        // Inside, it describes the jail it is in.
        let run = fx.jail_at(&fx.dir, &["--rw", &scratch, "--", &bin, "notice"], &[]);
        assert_ok(&run, "notice inside");
        assert_two_sentences(&run.stdout);
        assert!(
            run.stdout
                .contains(&format!("only {scratch} and a private /tmp can be written"))
                && !run.stdout.contains("every file is read-only except"),
            "as {who:?}: {}",
            run.stdout
        );
        let run = fx.jail_at(
            &fx.dir,
            &["--profile", "claude-code", "--", &bin, "notice"],
            &[],
        );
        assert_ok(&run, "notice inside claude-code");
        assert!(
            run.stdout.contains("profile claude-code")
                && run
                    .stdout
                    .contains("only ~/.claude and a private /tmp can be written"),
            "as {who:?}: {}",
            run.stdout
        );

        // --notice: on stderr, before anything the command writes.
        let cmd = "echo CMD-ERR >&2; echo CMD-OUT";
        let run = fx.sh_at(&fx.dir, &["--notice", "--rw", &scratch], cmd, &[]);
        assert_ok(&run, "--notice");
        assert_eq!(run.stdout, "CMD-OUT\n", "the notice went to stdout");
        let notice_at = run
            .stderr
            .find(&format!("only {scratch} and a private /tmp can be written"))
            .unwrap_or_else(|| panic!("as {who:?}: no notice on stderr\n{}", run.describe()));
        let cmd_at = run.stderr.find("CMD-ERR").expect("the command's stderr");
        assert!(
            notice_at < cmd_at,
            "the notice came after the command's output\n{}",
            run.describe()
        );
        // The line naming what left the environment (when anything did) follows the notice.
        let notice = run.stderr[..cmd_at]
            .split("\njail: removed from the environment:")
            .next()
            .unwrap()
            .trim_end();
        assert_two_sentences(notice);
        let run = fx.sh_at(&fx.dir, &["--rw", &scratch], cmd, &[]);
        assert_ok(&run, "no --notice");
        assert!(
            !run.stderr.contains("hand-off"),
            "a notice without --notice\n{}",
            run.describe()
        );
    }
}

/// BUG: `jail notice --profile claude-code` (the way a harness writes the prompt before starting
/// the agent) says every file is read-only when ~/.claude does not exist yet, though the run it
/// describes creates ~/.claude and makes it writable. After that first run the notice changes.
#[test]

fn notice_for_an_agent_profile_names_its_state_dir_before_the_first_run() {
    if !full_level_or_skip("notice_agent_profile") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "pnagent");
        assert!(!fx.home.join(".claude").exists());
        let run = fx.jail_at(&fx.dir, &["notice", "--profile", "claude-code"], &[]);
        assert_ok(&run, "notice --profile claude-code");
        assert!(
            run.stdout
                .contains("only ~/.claude and a private /tmp can be written"),
            "as {who:?}: the notice does not describe the run:\n{}",
            run.stdout
        );
    }
}

#[test]
fn the_documented_profile_example_loads_and_its_seed_is_created_read_only() {
    if !full_level_or_skip("doc-profile") {
        return;
    }
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/profiles.md")).unwrap();
    let start = page
        .find("```toml\ndescription = \"my reviewer\"")
        .expect("the example")
        + 8;
    let text = &page[start..start + page[start..].find("```").unwrap()];
    for who in users() {
        let fx = fixture(who, "doc-profile");
        let cache = fx.p("cache");
        let cfg = user_profiles(&fx, &[("mine", text)]);
        let env = [
            ("XDG_CONFIG_HOME", cfg.as_str()),
            ("XDG_CACHE_HOME", cache.as_str()),
        ];
        let run = fx.jail_at(&fx.dir, &["profile", "show", "mine", "--resolved"], &env);
        assert_ok(&run, "show");
        assert!(run.stdout.contains("[paths.seed]"), "{}", run.stdout);
        let run = fx.jail_at(
            &fx.dir,
            &[
                "--profile",
                "mine",
                "--",
                "/bin/sh",
                "-c",
                &format!("echo x >> {cache}/mytool/config.json"),
            ],
            &env,
        );
        assert!(!run.ok(), "the seed is read-only: {}", run.describe());
        assert_eq!(
            std::fs::read_to_string(fx.dir.join("cache/mytool/config.json")).unwrap(),
            "{}\n"
        );
    }
}

/// The notice's second sentence is true for the profile: under `default` a build that writes
/// into the project fails and the notice says so; under `review` the caches go to /tmp and a
/// build whose output is sent there works; under `workspace` the project takes the build.
/// Checked with the real tools (python's py_compile writes __pycache__ next to the source, or
/// under PYTHONPYCACHEPREFIX; cc writes its output where it is told).
#[test]
fn the_notice_says_what_builds_can_do_under_each_profile() {
    if !full_level_or_skip("the_notice_says_what_builds_can_do_under_each_profile") {
        return;
    }
    for who in users() {
        let fx = fixture(who, "notice-builds");
        std::fs::write(fx.repo.join("m.py"), "x = 1\n").unwrap();
        std::fs::write(fx.repo.join("m.c"), "int main(void) { return 0; }\n").unwrap();
        fx.give_to(who);
        let notice = |profile: &str| {
            let run = fx.jail_at(&fx.repo, &["notice", "--profile", profile], &[]);
            assert_ok(&run, "notice");
            assert_two_sentences(&run.stdout);
            run.stdout
        };
        let build = |profile: &str, script: &str| {
            fx.sh_at(&fx.repo, &["--profile", profile], script, &[])
                .ok()
        };
        let pycompile = "python3 -m py_compile m.py";
        let cc = "cc -o m.out m.c";

        let text = notice("default");
        assert!(
            text.contains("builds and tests that write into the project or a cache fail"),
            "{text}"
        );
        assert!(
            !text.contains("builds and linters all still work"),
            "{text}"
        );
        assert!(
            !build("default", pycompile) && !build("default", cc),
            "as {who:?}: default built"
        );

        let text = notice("review");
        assert!(
            text.contains("whose outputs and caches go to a private /tmp")
                && text.contains("PYTHONPYCACHEPREFIX"),
            "{text}"
        );
        assert!(
            build("review", pycompile),
            "as {who:?}: review's py_compile into /tmp"
        );
        assert!(
            !build("review", cc),
            "as {who:?}: review wrote into the project"
        );

        let text = notice("workspace");
        assert!(
            text.contains("git (add and commit too), and builds and tests that write only in"),
            "{text}"
        );
        assert!(build("workspace", cc), "as {who:?}: workspace's build");
        let _ = std::fs::remove_file(fx.repo.join("m.out"));
    }
}

/// A user profile that forgets `extends`, and a user default.toml, still get the default
/// protections (a hidden ~/.ssh, secrets out of the environment); leaving them out takes
/// `base = false`, said on every run. One bad file in the profiles directory costs only the
/// runs that use it. An unset `${VAR}` that drops a rule is said. `jail profile check` tells a
/// usable file from a broken one.
#[test]
fn base_protections_hold_bad_files_cost_only_their_runs_and_drops_are_said() {
    if !full_level_or_skip(
        "base_protections_hold_bad_files_cost_only_their_runs_and_drops_are_said",
    ) {
        return;
    }
    for who in users() {
        let fx = fixture(who, "pbase");
        let key = fx
            .home
            .join(".ssh/id_ed25519")
            .to_string_lossy()
            .into_owned();
        let cfg = user_profiles(
            &fx,
            &[
                (
                    "mine",
                    "description = \"no extends\"\n[paths]\nrw = [\"${CWD}\"]\n",
                ),
                ("default", "description = \"a user default, no extends\"\n"),
                ("bare", "base = false\n"),
                (
                    "unset",
                    "[paths]\nrw = [\"${JAIL_TEST_SURELY_UNSET}/out\"]\n",
                ),
            ],
        );
        let env = [
            ("XDG_CONFIG_HOME", cfg.as_str()),
            ("GITHUB_TOKEN", "SECRET-TOKEN"),
        ];
        let probe = format!("cat {key}; echo \"token=${{GITHUB_TOKEN:-gone}}\"");
        for profile in ["mine", "default"] {
            let run = fx.sh_at(&fx.repo, &["--profile", profile], &probe, &env);
            assert!(
                !run.stdout.contains("SECRET-SSH-KEY") && run.stdout.contains("token=gone"),
                "as {who:?}, profile {profile}: a protection of the base was lost\n{}",
                run.describe()
            );
        }
        // The plain run uses the user's default.toml: the base holds there too.
        let run = fx.sh_at(&fx.repo, &[], &probe, &env);
        assert!(!run.stdout.contains("SECRET-SSH-KEY"), "{}", run.describe());
        // Opting out is explicit, and said: the same read then works (the test can fail).
        let run = fx.sh_at(&fx.repo, &["--profile", "bare"], &probe, &env);
        assert!(
            run.stdout.contains("SECRET-SSH-KEY")
                && run
                    .stderr
                    .contains("base = false (in profile bare) leaves out the default protections"),
            "as {who:?}\n{}",
            run.describe()
        );
        let run = fx.jail_at(&fx.repo, &["--profile", "unset", "--", "true"], &env);
        assert!(
            run.ok()
                && run
                    .stderr
                    .contains("'${JAIL_TEST_SURELY_UNSET}/out' names an unset variable"),
            "as {who:?}\n{}",
            run.describe()
        );

        // Bad files: not UTF-8, a directory named like a profile.
        let dir = fx.dir.join("cfg/jail/profiles");
        std::fs::write(dir.join("binary.toml"), b"\xff\xfe\x00").unwrap();
        std::fs::create_dir_all(dir.join("folder.toml")).unwrap();
        fx.give_to(who);
        let run = fx.jail_at(&fx.repo, &["--profile", "mine", "--", "true"], &env);
        assert_ok(&run, "another profile with bad files beside it");
        let run = fx.jail_at(&fx.repo, &["profile", "list"], &env);
        assert_ok(&run, "profile list with bad files");
        assert!(
            run.stdout.contains("(unusable: profile binary")
                && run.stdout.contains("is a directory"),
            "{}",
            run.stdout
        );
        let run = fx.jail_at(
            &fx.repo,
            &["--profile", "binary", "--", "echo", "RAN"],
            &env,
        );
        assert_refused(&run, "the bad profile itself", &["binary", "not UTF-8"]);

        // jail profile check.
        let good = dir.join("mine.toml").to_string_lossy().into_owned();
        let run = fx.jail_at(&fx.repo, &["profile", "check", &good], &env);
        assert!(
            run.ok()
                && run
                    .stdout
                    .contains("usable; chain default (embedded) -> mine"),
            "{}",
            run.describe()
        );
        let broken = fx.dir.join("typo.toml");
        std::fs::write(&broken, "[paths]\nrww = []\n").unwrap();
        fx.give_to(who);
        let run = fx.jail_at(
            &fx.repo,
            &["profile", "check", &broken.to_string_lossy()],
            &env,
        );
        assert_eq!(run.code, Some(125), "{}", run.describe());
        assert!(run.stderr.contains("rww"), "{}", run.describe());
    }
}

/// jail's own profiles decide every later run: inside a writable tree (`--rw ~/.config`) a
/// command cannot rewrite them (a default.toml with `base = false` would weaken every run
/// after), by each of the mount view and Landlock alone.
#[test]
fn jails_own_profiles_stay_read_only_inside_a_writable_config_tree() {
    if !full_level_or_skip("jails_own_profiles_stay_read_only_inside_a_writable_config_tree") {
        return;
    }
    use common::{Attack, Layer};
    for who in users() {
        let fx = fixture(who, "pown");
        let cfg = user_profiles(&fx, &[("default", "description = \"mine\"\n")]);
        let file = format!("{cfg}/jail/profiles/default.toml");
        Attack::new(
            "rewrite jail's own default profile from inside",
            &["--rw", &cfg],
            vec![
                "/bin/sh".into(),
                "-c".into(),
                format!(
                    "if echo 'base = false' > {file}; then echo 'ALLOWED write'; else echo 'BLOCKED write'; exit 1; fi"
                ),
            ],
            &[Layer::Mount, Layer::Landlock],
        )
        .with_env("XDG_CONFIG_HOME", &cfg)
        .prove(&fx);
    }
}
