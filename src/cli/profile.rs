//! `jail profile list|show`: the profiles there are, where each comes from, and one profile as
//! written or resolved (TOML with each rule's origin, or JSON).

use serde::Serialize;

use super::args::ProfileCommand;
use crate::error::JailError;
use crate::policy::Access;
use crate::policy::profile::{self, Resolved};
use crate::prepare;

/// `jail profile list` and `jail profile show`.
pub fn profile_command(command: ProfileCommand) -> Result<i32, JailError> {
    let cat = prepare::catalog()?;
    match command {
        ProfileCommand::List => {
            for (name, entry) in &cat.entries {
                // A profile that cannot be used says why here; the others are listed as ever.
                let description = match cat.resolve(name) {
                    Ok(r) => r.description.unwrap_or_default(),
                    Err(e) => format!("(unusable: {e})"),
                };
                let description = crate::text::printable(&description);
                let name = crate::text::printable(name);
                let source = match (&entry.source, entry.shadows_embedded) {
                    (profile::Source::File(p), true) => {
                        format!("{} (shadows the embedded one)", p.display())
                    }
                    (src, _) => src.to_string(),
                };
                let source = crate::text::printable(&source);
                println!("{name:<12} {description}\n{:<12} from {source}", "");
            }
        }
        ProfileCommand::Check { file } => return check(cat, &file),
        ProfileCommand::Show {
            name,
            resolved,
            json,
        } => {
            let entry = cat.entries.get(&name).ok_or_else(|| {
                // The name only: the text points at `jail profile list`.
                JailError::UnknownProfile {
                    name: name.clone(),
                    known: Vec::new(),
                }
            })?;
            let r = cat.resolve(&name)?;
            match (resolved, json) {
                (false, false) => print!("{}", entry.text),
                (true, false) => print!("{}", resolved_toml(&r)),
                (_, true) => {
                    #[derive(Serialize)]
                    struct Out<'a> {
                        source: &'a profile::Source,
                        #[serde(flatten)]
                        profile: &'a Resolved,
                    }
                    let out = Out {
                        source: &entry.source,
                        profile: &r,
                    };
                    println!("{}", crate::text::versioned_json(&out));
                }
            }
        }
    }
    Ok(0)
}

/// `jail profile check FILE`: the file as a profile of the catalog (named by its file name,
/// shadowing one of that name as it would once installed), resolved, and what it would leave
/// out here.
fn check(mut cat: profile::Catalog, file: &std::path::Path) -> Result<i32, JailError> {
    let shown = crate::text::printable(&file.display().to_string());
    let bad = |reason: String| JailError::bad_path("profile check", file, reason);
    let name = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = std::fs::read(file).map_err(|e| bad(e.to_string()))?;
    let text = String::from_utf8(text).map_err(|_| bad("is not UTF-8 text".into()))?;
    if !profile::valid_name(&name) {
        return Err(bad(
            "the file name makes the profile's name, which must be letters, digits, '-' or '_'"
                .into(),
        ));
    }
    let shadows = cat.entries.contains_key(&name);
    cat.entries.insert(
        name.clone(),
        profile::Entry {
            name: name.clone(),
            source: profile::Source::File(file.to_path_buf()),
            text,
            shadows_embedded: shadows,
            unreadable: None,
        },
    );
    let r = cat.resolve(&name)?;
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let vars = |n: &str| std::env::var(n).ok();
    let x = profile::Expansion {
        home: home.as_deref(),
        cwd: &cwd,
        var: &vars,
    };
    let warnings = prepare::profile_warnings(&r, &x);
    println!(
        "profile {} ({shown}): usable; chain {}; {} path rules, {} environment rules{}",
        crate::text::printable(&name),
        crate::text::printable(&r.chain.join(" -> ")),
        r.paths.len(),
        r.env.deny.len() + r.env.keep.len() + r.env.set.len(),
        if shadows {
            "; shadows the profile of that name"
        } else {
            ""
        }
    );
    for w in &warnings {
        println!("warning: {w}");
    }
    Ok(0)
}

/// A resolved profile written back as TOML, each rule with the profile it came from.
fn resolved_toml(r: &Resolved) -> String {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut out = format!(
        "# profile {} (resolved: {})\n",
        r.name,
        r.chain.join(" -> ")
    );
    if let Some(d) = &r.description {
        out.push_str(&format!("description = {}\n", q(d)));
    }
    out.push_str(&paths_toml(r));
    out.push_str(&format!("\n[env]\nclear = {}\n", r.env.clear));
    for (key, list) in [("keep", &r.env.keep), ("deny", &r.env.deny)] {
        let items: Vec<String> = list.iter().map(|s| q(s)).collect();
        out.push_str(&format!("{key} = [{}]\n", items.join(", ")));
    }
    out.push_str("\n[env.set]\n");
    for (k, v) in &r.env.set {
        out.push_str(&format!("{k} = {}\n", q(v)));
    }
    out.push_str("\n[options]\n");
    // As the table is read (the derived form), with what a command reads of HOME said whether
    // or not a profile of the chain set it.
    let home = r.options.home.unwrap_or_default();
    let options = profile::ProfileOptions {
        home: Some(home),
        ..r.options.clone()
    };
    for line in toml::to_string(&options)
        .expect("a table of plain values")
        .lines()
    {
        match line.starts_with("home = ") {
            true => out.push_str(&format!("{line}  # {}\n", home.describe())),
            false => out.push_str(&format!("{line}\n")),
        }
    }
    if let Some(agent) = &r.agent {
        let list = |l: &[String]| l.iter().map(|s| q(s)).collect::<Vec<_>>().join(", ");
        out.push_str(&format!(
            "\n[agent]  # its login is given to it, and hidden from every other command\n\
             name = {}\ncommands = [{}]\nlogin = [{}]\n",
            q(&agent.name),
            list(&agent.commands),
            list(&agent.login)
        ));
    }
    if !r.secrets.is_empty() {
        out.push_str(
            "\n[secrets]  # with --net allow=, the command gets a placeholder; the proxy adds the \
             value for these hosts\n",
        );
        for (name, s) in &r.secrets {
            let hosts: Vec<String> = s.hosts.iter().map(|h| q(h)).collect();
            out.push_str(&format!(
                "{name} = [{}]  # {}\n",
                hosts.join(", "),
                s.profile
            ));
        }
    }
    out.push_str("\n[limits]\n");
    out.push_str(&r.limits.to_toml());
    out
}

/// The `[paths]` tables of a resolved profile: each rule, guard, agent state and seeded file
/// with the profile it came from.
fn paths_toml(r: &Resolved) -> String {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut out = String::new();
    out.push_str("\n[paths]\n");
    for (key, access, protect) in [
        ("ro", Access::Ro, false),
        ("rw", Access::Rw, false),
        ("hide", Access::Hide, false),
        ("protect", Access::Ro, true),
    ] {
        out.push_str(&format!("{key} = [\n"));
        for p in r
            .paths
            .iter()
            .filter(|p| p.access == access && p.protect == protect && p.seed.is_none())
        {
            out.push_str(&format!("    {},  # {}\n", q(&p.template), p.profile));
        }
        out.push_str("]\n");
    }
    out.push_str("\n[paths.guard]\n");
    for g in &r.guards {
        let keys: Vec<String> = g.keys.iter().map(|k| q(k)).collect();
        out.push_str(&format!(
            "{} = [{}]  # {}\n",
            q(&g.template),
            keys.join(", "),
            g.profile
        ));
    }
    out.push_str("\n[paths.state]\n");
    for st in &r.states {
        let data: Vec<String> = st.data.iter().map(|k| q(k)).collect();
        out.push_str(&format!(
            "{} = [{}]  # {}\n",
            q(&st.template),
            data.join(", "),
            st.profile
        ));
    }
    out.push_str("\n[paths.seed]\n");
    for p in r.paths.iter().filter(|p| p.seed.is_some()) {
        let content = p.seed.as_deref().unwrap_or_default();
        out.push_str(&format!(
            "{} = {}  # {}\n",
            q(&p.template),
            q(content),
            p.profile
        ));
    }
    out
}
