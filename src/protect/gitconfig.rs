//! Reading a git config file the way git does, for the keys jail needs (`core.hooksPath`,
//! `core.worktree`, includes). A hand-rolled line test misses what git accepts: a key on the
//! section's own line (`[core] hooksPath = x`), comments after a value, quotes, escapes and
//! continued lines, names in any case, `[section "sub"]` headers.

use std::path::{Path, PathBuf};

/// One `section.key = value` of a config text, in file order. `section` is lower-case and
/// holds the subsection after a dot (`includeif.gitdir:~/x.path` has section
/// `includeif.gitdir:~/x`); `key` is lower-case; a key without `=` has the value `true`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub section: String,
    pub key: String,
    pub value: String,
}

/// Every entry of `text`. Malformed lines are skipped (git would refuse the file; skipping
/// cannot hide a value git would read).
pub fn parse(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut section = String::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        // Skip blanks and empty lines.
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i >= chars.len() {
            break;
        }
        match chars[i] {
            '#' | ';' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '[' => {
                i += 1;
                let mut name = String::new();
                let mut sub: Option<String> = None;
                while i < chars.len() && chars[i] != ']' && chars[i] != '\n' {
                    if chars[i] == '"' {
                        i += 1;
                        let mut s = String::new();
                        while i < chars.len() && chars[i] != '"' && chars[i] != '\n' {
                            if chars[i] == '\\' && i + 1 < chars.len() {
                                i += 1;
                            }
                            s.push(chars[i]);
                            i += 1;
                        }
                        sub = Some(s);
                        i += 1;
                    } else {
                        if !chars[i].is_whitespace() {
                            name.push(chars[i]);
                        }
                        i += 1;
                    }
                }
                i += 1; // ']'
                let name = name.to_ascii_lowercase();
                section = match sub {
                    // [section "Sub"]: the subsection keeps its case.
                    Some(s) => format!("{name}.{s}"),
                    // [section.sub]: the legacy form, lower-cased whole.
                    None => name,
                };
            }
            c if c.is_ascii_alphabetic() => {
                let mut key = String::new();
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '-') {
                    key.push(chars[i].to_ascii_lowercase());
                    i += 1;
                }
                while i < chars.len() && (chars[i] == ' ' || chars[i] == '\t') {
                    i += 1;
                }
                let value = if i < chars.len() && chars[i] == '=' {
                    i += 1;
                    let (v, next) = value(&chars, i);
                    i = next;
                    v
                } else {
                    "true".to_string()
                };
                out.push(Entry {
                    section: section.clone(),
                    key,
                    value,
                });
            }
            _ => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
        }
    }
    out
}

/// A value from `start` to its end of line: quotes, escapes, continuations and comments as git
/// reads them; unquoted white space at either end dropped.
fn value(chars: &[char], mut i: usize) -> (String, usize) {
    let mut out = String::new();
    let mut quoted = false;
    // Length of `out` up to its last character that must be kept (quoted or non-blank).
    let mut keep = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            // The end of the line (inside quotes too: git refuses an unterminated quote).
            '\n' => break,
            '"' => quoted = !quoted,
            '#' | ';' if !quoted => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                break;
            }
            '\\' => {
                i += 1;
                match chars.get(i) {
                    Some('\n') => {} // continued on the next line
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('b') => {
                        out.pop();
                    }
                    Some(&other) => out.push(other),
                    None => break,
                }
                keep = out.len();
            }
            c if c.is_whitespace() && !quoted => {
                if !out.is_empty() {
                    out.push(c);
                }
            }
            c => {
                out.push(c);
                keep = out.len();
            }
        }
        if quoted {
            keep = out.len();
        }
        i += 1;
    }
    out.truncate(keep);
    (out, i)
}

/// The last value of `section.key` (git's "last one wins"), lower-case names.
pub fn last<'a>(entries: &'a [Entry], section: &str, key: &str) -> Option<&'a str> {
    entries
        .iter()
        .rev()
        .find(|e| e.section == section && e.key == key)
        .map(|e| e.value.as_str())
}

/// The files a config includes (`include.path`, and `includeIf.*.path` whatever its condition:
/// reading one that git would skip can only protect more), relative to the including file.
pub fn includes(entries: &[Entry], file: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    entries
        .iter()
        .filter(|e| {
            e.key == "path" && (e.section == "include" || e.section.starts_with("includeif."))
        })
        .filter_map(|e| expand(&e.value, file.parent()?, home))
        .collect()
}

/// A path value as git resolves it: `~/` against HOME, a relative one against `base`.
pub fn expand(value: &str, base: &Path, home: Option<&Path>) -> Option<PathBuf> {
    if value.is_empty() {
        return None;
    }
    let p = match value.strip_prefix("~/") {
        Some(rest) => home?.join(rest),
        None => PathBuf::from(value),
    };
    Some(crate::paths::absolute(base, &p))
}

/// The raw `core.hooksPath` values of a config file and the files it includes (two levels
/// deep, as far as they can be read). Git takes the last; every one is returned, which can
/// only protect more.
pub fn hooks_values(config: &Path, home: Option<&Path>) -> Vec<String> {
    let mut found = Vec::new();
    let mut files = vec![(config.to_path_buf(), 0)];
    while let Some((file, depth)) = files.pop() {
        let Ok(text) = read_small(&file) else {
            continue;
        };
        let entries = parse(&text);
        if let Some(v) = last(&entries, "core", "hookspath") {
            found.push(v.to_string());
        }
        if depth < 2 {
            files.extend(
                includes(&entries, &file, home)
                    .into_iter()
                    .map(|f| (f, depth + 1)),
            );
        }
    }
    found
}

/// Every hooks directory git may use for the repository whose git directory is `gitdir`: its
/// own and the user's `core.hooksPath`, relative values resolved against every directory the
/// hooks may run in — the work tree (`gitdir`'s parent for a `.git`, `core.worktree` when set,
/// the git directory itself when bare) and each linked worktree (`worktrees/*/gitdir`).
pub fn repo_hooks_dirs(gitdir: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let config = gitdir.join("config");
    let mut trees = vec![match gitdir.file_name() {
        Some(n) if n == ".git" => gitdir.parent().unwrap_or(gitdir).to_path_buf(),
        _ => gitdir.to_path_buf(),
    }];
    if let Ok(text) = read_small(&config) {
        if let Some(wt) = last(&parse(&text), "core", "worktree") {
            trees.extend(expand(wt, gitdir, home));
        }
    }
    for e in std::fs::read_dir(gitdir.join("worktrees"))
        .into_iter()
        .flatten()
        .flatten()
        .take(256)
    {
        // worktrees/NAME/gitdir holds the path of the worktree's `.git` file.
        if let Ok(text) = read_small(&e.path().join("gitdir")) {
            if let Some(dotgit) = expand(text.trim(), &e.path(), home) {
                trees.extend(dotgit.parent().map(Path::to_path_buf));
            }
        }
    }
    let mut out = Vec::new();
    for tree in &trees {
        out.extend(hooks_dirs_for(&config, tree, home));
    }
    out.sort();
    out.dedup();
    out
}

/// The git config files that apply to every repository: the system's, the XDG one and
/// `~/.gitconfig`.
pub fn global_files(home: Option<&Path>) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = vec![PathBuf::from("/etc/gitconfig")];
    files.extend(user_files(home));
    files
}

/// The user's own git config files (those a writable home can hold): the XDG one and
/// `~/.gitconfig`.
pub fn user_files(home: Option<&Path>) -> Vec<PathBuf> {
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| home.map(|h| h.join(".config")));
    let mut files: Vec<PathBuf> = Vec::new();
    files.extend(xdg.map(|x| x.join("git/config")));
    files.extend(home.map(|h| h.join(".gitconfig")));
    files
}

/// Every hooks directory git may use for the repository whose config is `config` and work tree
/// `worktree`: its own `core.hooksPath` and the user's global ones, relative values against the
/// work tree. (Git takes the last one set; each is protected, which can only protect more.)
pub fn hooks_dirs_for(config: &Path, worktree: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    global_values(home)
        .iter()
        .cloned()
        .chain(hooks_values(config, home))
        .filter_map(|v| expand(&v, worktree, home))
        .collect()
}

/// The raw `core.hooksPath` values of the user's own configs, read once per process (HOME
/// does not change while jail runs).
fn global_values(home: Option<&Path>) -> &'static [String] {
    static VALUES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    VALUES.get_or_init(|| {
        global_files(home)
            .iter()
            .flat_map(|f| hooks_values(f, home))
            .collect()
    })
}

/// The files `config` includes, and those they include (two levels deep): git reads them as
/// part of the config, so they carry the same commands.
pub fn included_files(config: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut files = vec![(config.to_path_buf(), 0)];
    while let Some((file, depth)) = files.pop() {
        let Ok(text) = read_small(&file) else {
            continue;
        };
        if depth >= 2 {
            continue;
        }
        for inc in includes(&parse(&text), &file, home) {
            if !out.contains(&inc) && out.len() < 64 {
                out.push(inc.clone());
                files.push((inc, depth + 1));
            }
        }
    }
    out
}

/// A config file's text, at most 1 MiB (a planted one could be huge); a regular file only,
/// opened without following a symlink or blocking on a FIFO.
pub fn read_small(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut text = String::new();
    file.take(1 << 20).read_to_string(&mut text)?;
    Ok(text)
}

/// The hooks directories the user's own git configs name with an absolute or `~/` path
/// (includes followed): git runs them for every repository, also one not seen yet.
pub fn global_hooks_dirs(home: Option<&Path>) -> Vec<PathBuf> {
    global_values(home)
        .iter()
        .filter(|v| v.starts_with('/') || v.starts_with("~/"))
        .filter_map(|v| expand(v, Path::new("/"), home))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hooks(text: &str) -> Option<String> {
        last(&parse(text), "core", "hookspath").map(str::to_string)
    }

    #[test]
    fn reads_values_where_git_does() {
        assert_eq!(
            hooks("[core]\n\thooksPath = .hooks\n").as_deref(),
            Some(".hooks")
        );
        assert_eq!(
            hooks("[core] hooksPath = .hooks\n").as_deref(),
            Some(".hooks")
        );
        assert_eq!(
            hooks("[CORE]\nHOOKSPATH=.h ; team hooks\n").as_deref(),
            Some(".h")
        );
        assert_eq!(
            hooks("[core]\nhooksPath = \"a b\" # x\n").as_deref(),
            Some("a b")
        );
        assert_eq!(hooks("[core]\nhooksPath = a\\\nb\n").as_deref(), Some("ab"));
        assert_eq!(
            hooks("[core]\nhooksPath = one\nhooksPath = two\n").as_deref(),
            Some("two")
        );
        assert_eq!(hooks("[other]\nhooksPath = x\n[core]\nbare=false\n"), None);
        assert_eq!(hooks("# [core]\n; hooksPath = x\n"), None);
        let e = parse("[includeIf \"gitdir:~/w/\"]\npath = ../x.inc\n[include]\npath=y\n");
        let inc = includes(&e, Path::new("/r/.git/config"), None);
        assert_eq!(inc, [PathBuf::from("/r/x.inc"), PathBuf::from("/r/.git/y")]);
    }
}
