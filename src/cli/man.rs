//! `jail man`: the man pages, from the same clap definitions as `--help`. The main page lists
//! each subcommand as `jail-NAME(1)`, so each of those pages is generated too, with the
//! subcommand's own flags: `jail man apply` prints one, `jail man --dir DIR` writes them all.

use std::path::Path;

use clap::CommandFactory;

use super::args::Cli;
use crate::error::JailError;

/// jail's command as the pages describe it: built (so every subcommand knows its full name,
/// `jail-profile-show`), without clap's `help` subcommand (no page of its own: `--help` is
/// on every page).
fn command() -> clap::Command {
    fn no_help(cmd: clap::Command) -> clap::Command {
        let subs: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        let mut cmd = cmd.disable_help_subcommand(true);
        for name in subs {
            cmd = cmd.mut_subcommand(name, no_help);
        }
        cmd
    }
    let mut cmd = no_help(Cli::command());
    cmd.build();
    cmd
}

/// Every page: (file name, roff), jail.1 first, then each subcommand's, depth first.
pub fn pages() -> std::io::Result<Vec<(String, Vec<u8>)>> {
    fn walk(cmd: &clap::Command, out: &mut Vec<(String, Vec<u8>)>) -> std::io::Result<()> {
        // Every page is jail's, of this version (a subcommand has no version of its own).
        let page = clap_mangen::Man::new(cmd.clone())
            .source(format!("jail {}", env!("CARGO_PKG_VERSION")));
        let mut roff = Vec::new();
        page.render(&mut roff)?;
        out.push((page.get_filename(), roff));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub, out)?;
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(&command(), &mut out)?;
    Ok(out)
}

/// `jail man [SUBCOMMAND…] [--dir DIR]`.
pub fn man(subcommand: &[String], dir: Option<&Path>) -> Result<i32, JailError> {
    let fail = |e: std::io::Error| JailError::io("man page", e);
    let pages = pages().map_err(fail)?;
    if let Some(dir) = dir {
        for (name, roff) in &pages {
            let path = dir.join(name);
            std::fs::write(&path, roff)
                .map_err(|e| JailError::bad_path("man --dir", &path, e.to_string()))?;
        }
        crate::text::say(format!(
            "jail: wrote {} man pages to {}",
            pages.len(),
            crate::text::printable(&dir.display().to_string())
        ));
        return Ok(0);
    }
    let want = std::iter::once("jail")
        .chain(subcommand.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("-");
    let Some((_, roff)) = pages.iter().find(|(name, _)| *name == format!("{want}.1")) else {
        let names: Vec<&str> = pages
            .iter()
            .filter_map(|(n, _)| n.strip_prefix("jail-")?.strip_suffix(".1"))
            .collect();
        return Err(JailError::BadInput(format!(
            "man: no page for '{}': the subcommands' pages are {} (`jail man profile show` for \
             jail-profile-show)",
            crate::text::printable(&subcommand.join(" ")),
            names.join(", ")
        )));
    };
    use std::io::Write;
    std::io::stdout().write_all(roff).map_err(fail)?;
    Ok(0)
}
