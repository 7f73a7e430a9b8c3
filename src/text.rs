//! What jail prints on the user's terminal. Names in it may be the command's choice (a path it
//! created, its process name) or come from a file it wrote: control characters are shown
//! escaped, never sent. An escape sequence could rewrite the screen, hide a warning (`\e[2K`),
//! or write the user's clipboard (OSC 52); a bidirectional override could make a path read as
//! another.

/// `s` with every control character (C0, C1, DEL) and every invisible or bidirectional format
/// character shown as a Rust escape (`\u{1b}`, `\n`).
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() || is_invisible_format(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Zero-width and bidirectional formatting characters (Unicode category Cf in common use).
fn is_invisible_format(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}' | '\u{ad}' | '\u{61c}'
        // Line and paragraph separators (a line break to a parser, none on screen), the tags
        // and variation selectors (invisible, and enough to carry a payload a decoder reads),
        // and the blank letters and fillers that render as nothing.
        | '\u{2028}' | '\u{2029}' | '\u{e0000}'..='\u{e007f}' | '\u{fe00}'..='\u{fe0f}'
        | '\u{e0100}'..='\u{e01ef}' | '\u{180b}'..='\u{180f}' | '\u{034f}' | '\u{115f}'
        | '\u{1160}' | '\u{17b4}' | '\u{17b5}' | '\u{3164}' | '\u{ffa0}' | '\u{fff9}'..='\u{fffb}')
}

/// Bytes bound for a terminal (a patch a person reads): every control character but newline
/// and tab, every C1 control (U+0080..U+009F, and the raw bytes 0x80..0x9F that some
/// terminals take as C1), and every invisible or bidirectional format character shown escaped;
/// bytes that are not UTF-8 shown as `\xNN`. A file's content and a symlink's target are the
/// command's choice: raw, an OSC 52 sequence writes the reader's clipboard, a CSI one rewrites
/// what the reader sees.
pub fn terminal_safe(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if (c.is_control() && c != '\n' && c != '\t') || is_invisible_format(c) {
                out.extend(c.escape_default().to_string().bytes());
            } else {
                let mut buf = [0u8; 4];
                out.extend(c.encode_utf8(&mut buf).bytes());
            }
        }
        for b in chunk.invalid() {
            out.extend(format!("\\x{b:02x}").bytes());
        }
    }
    out
}

/// A path as jail shows it in a line of text: control and invisible characters escaped as
/// [`printable`] does, and each byte that is not UTF-8 as `\xNN` (a lossy U+FFFD would show
/// two different names the same).
pub fn path_text(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for chunk in path.as_os_str().as_bytes().utf8_chunks() {
        out.push_str(&printable(chunk.valid()));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Prints one line on stderr, escaped.
pub fn say(line: impl AsRef<str>) {
    eprintln!("{}", printable(line.as_ref()));
}

/// `s` as one shell word: as it is when it holds only characters no shell treats specially,
/// else in single quotes (a path a command chose, shown in a flag the user may paste).
pub fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A JSON output of jail's (`probe --json`, `status --json`, `profile show --json`,
/// `--dry-run`): `value`'s fields after a first `"jail_version"`, so that a consumer can tell
/// which jail wrote what it reads.
pub fn versioned_json<T: serde::Serialize>(value: &T) -> String {
    #[derive(serde::Serialize)]
    struct Versioned<'a, T: serde::Serialize> {
        jail_version: &'static str,
        #[serde(flatten)]
        value: &'a T,
    }
    serde_json::to_string_pretty(&Versioned {
        jail_version: env!("CARGO_PKG_VERSION"),
        value,
    })
    .expect("serializable")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_format_characters_are_escaped() {
        assert_eq!(printable("a\u{1b}[2Kb"), "a\\u{1b}[2Kb");
        assert_eq!(
            printable("x\u{1b}]52;c;aGk=\u{7}"),
            "x\\u{1b}]52;c;aGk=\\u{7}"
        );
        assert_eq!(printable("new\nline\ttab"), "new\\nline\\ttab");
        assert_eq!(printable("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(printable("evil\u{202e}txt.sh"), "evil\\u{202e}txt.sh");
        assert_eq!(printable("plain /path/ü"), "plain /path/ü");
        assert_eq!(
            printable("a\u{2028}b\u{e0041}\u{fe0f}\u{3164}"),
            "a\\u{2028}b\\u{e0041}\\u{fe0f}\\u{3164}"
        );
    }

    #[test]
    fn terminal_bytes_keep_lines_and_escape_the_rest() {
        let raw = b"+x\x1b]52;c;aGk=\x07\x1b[2J\ttab\n+\xc2\x9b31m \x9b31m caf\xc3\xa9 \xff\n";
        let shown = String::from_utf8(terminal_safe(raw)).unwrap();
        assert_eq!(
            shown,
            "+x\\u{1b}]52;c;aGk=\\u{7}\\u{1b}[2J\ttab\n+\\u{9b}31m \\x9b31m café \\xff\n"
        );
        assert!(!shown.bytes().any(|b| b == 0x1b || b == 0x07 || b == 0x9b));
    }
}
