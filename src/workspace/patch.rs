//! A change set as a git patch that `git apply` takes on a clean copy of the root: text hunks,
//! binary files as `GIT binary patch` literals (with the full blob ids git apply insists on),
//! new and deleted files, mode changes, symlinks, and renames (a deleted file whose content a
//! new one has). Flagged entries come first, each with a `# jail: flagged` line above it (git
//! apply skips text before a `diff --git` line).

use std::io::{self, Write};
use std::path::Path;

use super::changes::{Item, Side, SideKind};

/// Writes `items` as one patch.
pub fn write(items: &[Item], out: &mut dyn Write) -> io::Result<()> {
    let mut order: Vec<&Item> = items.iter().collect();
    order.sort_by_key(|i| (!i.flagged(), i.path.clone()));
    let renames = pair_renames(&order);
    let mut skip = std::collections::BTreeSet::new();
    for (from, to) in &renames {
        skip.insert(*from);
        skip.insert(*to);
    }
    for (i, it) in order.iter().enumerate() {
        if let Some((from, _)) = renames.iter().find(|(_, to)| *to == i) {
            write_rename(order[*from], it, out)?;
        } else if !skip.contains(&i) {
            write_item(it, out)?;
        }
    }
    Ok(())
}

/// Content of one side.
fn content(side: &Side) -> io::Result<Vec<u8>> {
    match &side.kind {
        SideKind::File => super::layer::read_regular(&side.abs),
        SideKind::Symlink(target) => Ok(target.as_os_str().as_encoded_bytes().to_vec()),
    }
}

/// The mode git records: 100644, 100755 or 120000.
fn git_mode(side: &Side) -> &'static str {
    match side.kind {
        SideKind::Symlink(_) => "120000",
        SideKind::File if super::changes::executable(side.mode) => "100755",
        SideKind::File => "100644",
    }
}

fn blob_id(data: &[u8]) -> String {
    let mut h = sha1_smol::Sha1::new();
    h.update(format!("blob {}\0", data.len()).as_bytes());
    h.update(data);
    h.digest().to_string()
}

const NULL_ID: &str = "0000000000000000000000000000000000000000";

/// Pairs of (deleted, new) positions in `order` with the same content and kind: renames.
/// Looked up by content (a map), so a run that deletes and makes many files costs linear time.
fn pair_renames(order: &[&Item]) -> Vec<(usize, usize)> {
    let id = |s: &Side| {
        content(s)
            .ok()
            .map(|c| (git_mode(s) == "120000", blob_id(&c)))
    };
    let mut gone: std::collections::HashMap<(bool, String), Vec<usize>> =
        std::collections::HashMap::new();
    for (n, i) in order.iter().enumerate() {
        if i.new.is_none() {
            if let Some(key) = i.old.as_ref().and_then(id) {
                gone.entry(key).or_default().push(n);
            }
        }
    }
    for list in gone.values_mut() {
        list.reverse(); // taken from the end: the first deleted pairs first
    }
    let mut out = Vec::new();
    for (n, it) in order.iter().enumerate() {
        let (None, Some(new)) = (&it.old, &it.new) else {
            continue;
        };
        let Some(want) = id(new) else { continue };
        // An empty file is no evidence of a rename.
        if want.1 == blob_id(b"") {
            continue;
        }
        if let Some(from) = gone.get_mut(&want).and_then(Vec::pop) {
            out.push((from, n));
        }
    }
    out
}

/// A path as git writes it: quoted with C escapes when it holds anything unusual.
fn quote(prefix: &str, path: &Path) -> String {
    let bytes = path.as_os_str().as_encoded_bytes();
    let plain = bytes
        .iter()
        .all(|&b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\');
    if plain {
        return format!("{prefix}{}", String::from_utf8_lossy(bytes));
    }
    let mut s = String::from("\"");
    s.push_str(prefix);
    for &b in bytes {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\t' => s.push_str("\\t"),
            b'\n' => s.push_str("\\n"),
            0x20..0x7f => s.push(b as char),
            _ => s.push_str(&format!("\\{b:03o}")),
        }
    }
    s.push('"');
    s
}

fn flag_lines(it: &Item, out: &mut dyn Write) -> io::Result<()> {
    for f in &it.flags {
        writeln!(out, "# jail: flagged: {}", crate::text::printable(f))?;
    }
    Ok(())
}

fn write_rename(from: &Item, to: &Item, out: &mut dyn Write) -> io::Result<()> {
    // Both halves' flags: a flagged deletion is left by an apply, which then copies, not moves.
    flag_lines(from, out)?;
    flag_lines(to, out)?;
    let (old, new) = (
        from.old.as_ref().expect("deleted"),
        to.new.as_ref().expect("new"),
    );
    writeln!(
        out,
        "diff --git {} {}",
        quote("a/", &from.path),
        quote("b/", &to.path)
    )?;
    if git_mode(old) != git_mode(new) {
        writeln!(
            out,
            "old mode {}\nnew mode {}",
            git_mode(old),
            git_mode(new)
        )?;
    }
    writeln!(out, "similarity index 100%")?;
    writeln!(out, "rename from {}", quote("", &from.path))?;
    writeln!(out, "rename to {}", quote("", &to.path))
}

fn write_item(it: &Item, out: &mut dyn Write) -> io::Result<()> {
    flag_lines(it, out)?;
    let a = quote("a/", &it.path);
    let b = quote("b/", &it.path);
    writeln!(out, "diff --git {a} {b}")?;
    let old_data = it.old.as_ref().map(content).transpose()?;
    let new_data = it.new.as_ref().map(content).transpose()?;
    // A file that becomes a symlink (or back) is a deletion and a creation in git's terms.
    if let (Some(o), Some(n)) = (&it.old, &it.new) {
        if (git_mode(o) == "120000") != (git_mode(n) == "120000") {
            let gone = Item {
                new: None,
                flags: vec![],
                ..it.clone()
            };
            let made = Item {
                old: None,
                ..it.clone()
            };
            // Undo the header line just written: write both halves in full instead.
            return write_split(&gone, &made, out);
        }
    }
    match (&it.old, &it.new) {
        (None, Some(n)) => writeln!(out, "new file mode {}", git_mode(n))?,
        (Some(o), None) => writeln!(out, "deleted file mode {}", git_mode(o))?,
        (Some(o), Some(n)) if git_mode(o) != git_mode(n) => {
            writeln!(out, "old mode {}\nnew mode {}", git_mode(o), git_mode(n))?
        }
        _ => {}
    }
    let old_b = old_data.as_deref().unwrap_or_default();
    let new_b = new_data.as_deref().unwrap_or_default();
    if old_data.is_some() && new_data.is_some() && old_b == new_b {
        return Ok(()); // a mode change only
    }
    let old_id = old_data
        .as_ref()
        .map_or(NULL_ID.to_string(), |d| blob_id(d));
    let new_id = new_data
        .as_ref()
        .map_or(NULL_ID.to_string(), |d| blob_id(d));
    let keep_mode = match (&it.old, &it.new) {
        (Some(o), Some(n)) if git_mode(o) == git_mode(n) => format!(" {}", git_mode(o)),
        _ => String::new(),
    };
    writeln!(out, "index {old_id}..{new_id}{keep_mode}")?;
    if old_b.is_empty() && new_b.is_empty() {
        return Ok(());
    }
    // Git's own test (`buffer_is_binary`): a NUL in the first 8000 bytes. Anything else is
    // text in any encoding, shown line by line as git shows it: a base85 literal would hide
    // code a reviewer must read.
    let binary = |d: &[u8]| d[..d.len().min(8000)].contains(&0);
    if binary(old_b) || binary(new_b) {
        writeln!(out, "GIT binary patch")?;
        return binary_literal(new_b, out);
    }
    let dev_null = "/dev/null".to_string();
    writeln!(out, "--- {}", if it.old.is_some() { &a } else { &dev_null })?;
    writeln!(out, "+++ {}", if it.new.is_some() { &b } else { &dev_null })?;
    unified(old_b, new_b, out)
}

/// The lines of `data` as git splits them: at each `\n` only (a lone `\r` is part of a line;
/// a diff that split there would be a patch git apply calls corrupt), each with its `\n`.
fn lines(data: &[u8]) -> Vec<&[u8]> {
    data.split_inclusive(|b| *b == b'\n').collect()
}

/// The unified hunks (three lines of context) from `old` to `new`, as bytes.
fn unified(old: &[u8], new: &[u8], out: &mut dyn Write) -> io::Result<()> {
    let (a, b) = (lines(old), lines(new));
    let ops = similar::capture_diff_slices(similar::Algorithm::Myers, &a, &b);
    for group in similar::group_diff_ops(ops, 3) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let (_, o1, n1) = first.as_tag_tuple();
        let (_, o2, n2) = last.as_tag_tuple();
        let range = |start: usize, end: usize| {
            let len = end - start;
            match len {
                1 => format!("{}", start + 1),
                0 => format!("{start},0"),
                _ => format!("{},{len}", start + 1),
            }
        };
        writeln!(
            out,
            "@@ -{} +{} @@",
            range(o1.start, o2.end),
            range(n1.start, n2.end)
        )?;
        let line = |out: &mut dyn Write, tag: u8, l: &[u8]| -> io::Result<()> {
            out.write_all(&[tag])?;
            out.write_all(l)?;
            if !l.ends_with(b"\n") {
                out.write_all(b"\n\\ No newline at end of file\n")?;
            }
            Ok(())
        };
        for op in &group {
            let (tag, o, n) = op.as_tag_tuple();
            match tag {
                similar::DiffTag::Equal => {
                    for l in &a[o] {
                        line(out, b' ', l)?;
                    }
                }
                similar::DiffTag::Delete => {
                    for l in &a[o] {
                        line(out, b'-', l)?;
                    }
                }
                similar::DiffTag::Insert => {
                    for l in &b[n] {
                        line(out, b'+', l)?;
                    }
                }
                similar::DiffTag::Replace => {
                    for l in &a[o] {
                        line(out, b'-', l)?;
                    }
                    for l in &b[n] {
                        line(out, b'+', l)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Two items for one path (a file that became a symlink): the first's header is already out.
fn write_split(gone: &Item, made: &Item, out: &mut dyn Write) -> io::Result<()> {
    let old = gone.old.as_ref().expect("old");
    let data = content(old)?;
    writeln!(out, "deleted file mode {}", git_mode(old))?;
    writeln!(out, "index {}..{NULL_ID}", blob_id(&data))?;
    if !data.is_empty() {
        writeln!(out, "GIT binary patch")?;
        binary_literal(b"", out)?;
    }
    write_item(made, out)
}

/// A `literal` hunk: the new content, zlib-compressed, in git's base85, 52 bytes a line.
fn binary_literal(data: &[u8], out: &mut dyn Write) -> io::Result<()> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(data)?;
    let packed = z.finish()?;
    writeln!(out, "literal {}", data.len())?;
    for line in packed.chunks(52) {
        let len = line.len() as u8;
        let tag = if len <= 26 {
            b'A' + len - 1
        } else {
            b'a' + len - 27
        };
        let mut s = String::from(tag as char);
        for group in line.chunks(4) {
            let mut word = [0u8; 4];
            word[..group.len()].copy_from_slice(group);
            let mut v = u32::from_be_bytes(word);
            let mut chars = [0u8; 5];
            for c in chars.iter_mut().rev() {
                *c = BASE85[(v % 85) as usize];
                v /= 85;
            }
            s.push_str(std::str::from_utf8(&chars).expect("ascii"));
        }
        writeln!(out, "{s}")?;
    }
    writeln!(out)
}

const BASE85: &[u8; 85] =
    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes a literal hunk as git apply does: base85 lines, then zlib.
    fn decode(hunk: &str) -> Vec<u8> {
        let mut packed = Vec::new();
        for line in hunk.lines().skip(1).filter(|l| !l.is_empty()) {
            let tag = line.as_bytes()[0];
            let len = if tag <= b'Z' {
                tag - b'A' + 1
            } else {
                tag - b'a' + 27
            } as usize;
            let mut bytes = Vec::new();
            for group in line.as_bytes()[1..].chunks(5) {
                let v = group.iter().fold(0u32, |v, c| {
                    v * 85 + BASE85.iter().position(|b| b == c).unwrap() as u32
                });
                bytes.extend(v.to_be_bytes());
            }
            packed.extend(&bytes[..len]);
        }
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(&packed[..]), &mut out)
            .unwrap();
        out
    }

    #[test]
    fn binary_literals_decode_to_their_content() {
        for data in [
            &b""[..],
            b"\x00\x01\xff",
            &[7u8; 300][..],
            &(0..=255).collect::<Vec<u8>>(),
        ] {
            let mut out = Vec::new();
            binary_literal(data, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert!(text.starts_with(&format!("literal {}\n", data.len())));
            assert!(text.lines().all(|l| l.len() <= 66), "{text}");
            assert_eq!(decode(&text), data);
        }
    }

    #[test]
    fn unusual_paths_are_quoted_as_git_quotes_them() {
        assert_eq!(quote("a/", Path::new("src/x y.rs")), "a/src/x y.rs");
        assert_eq!(
            quote("a/", Path::new("t\"\n\u{e9}")),
            "\"a/t\\\"\\n\\303\\251\""
        );
    }

    #[test]
    fn lines_split_at_newlines_only_and_the_last_one_is_marked() {
        let mut out = Vec::new();
        unified(b"a\rb\nc\n", b"a\rB\nc", &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "@@ -1,2 +1,2 @@\n-a\rb\n-c\n+a\rB\n+c\n\\ No newline at end of file\n"
        );
        let mut out = Vec::new();
        unified(b"", b"x\n", &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "@@ -0,0 +1 @@\n+x\n");
    }

    #[test]
    fn blob_ids_are_gits() {
        assert_eq!(blob_id(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
        assert_eq!(
            blob_id(b"hello\n"),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
    }
}
