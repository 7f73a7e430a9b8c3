//! Name patterns as profiles write them (`AWS_*`, `*_TOKEN`): one `*` or more, ASCII case
//! ignored.

/// `*` matches any run of characters; everything else matches itself, ignoring ASCII case
/// (`github_token` is as secret as `GITHUB_TOKEN`). No allocation: it runs for every pattern and
/// every variable at each launch.
pub fn matches(pattern: &str, name: &str) -> bool {
    Pattern::of(pattern).matches(name)
}

/// A pattern split at its stars once: what it starts and ends with, and the runs between.
struct Pattern<'a> {
    first: &'a [u8],
    last: &'a [u8],
    /// The runs between stars, none empty; None: no star, the name itself.
    middle: Option<Vec<&'a [u8]>>,
}

impl<'a> Pattern<'a> {
    fn of(pattern: &'a str) -> Pattern<'a> {
        let p = pattern.as_bytes();
        let (Some(star), Some(last_star)) = (
            p.iter().position(|&c| c == b'*'),
            p.iter().rposition(|&c| c == b'*'),
        ) else {
            return Pattern {
                first: p,
                last: &[],
                middle: None,
            };
        };
        let middle = match last_star > star {
            true => p[star + 1..last_star]
                .split(|&c| c == b'*')
                .filter(|m| !m.is_empty())
                .collect(),
            false => Vec::new(),
        };
        Pattern {
            first: &p[..star],
            last: &p[last_star + 1..],
            middle: Some(middle),
        }
    }

    fn matches(&self, name: &str) -> bool {
        let n = name.as_bytes();
        let Some(middle) = &self.middle else {
            return self.first.eq_ignore_ascii_case(n);
        };
        let (first, last) = (self.first, self.last);
        if n.len() < first.len() + last.len()
            || !n[..first.len()].eq_ignore_ascii_case(first)
            || !n[n.len() - last.len()..].eq_ignore_ascii_case(last)
        {
            return false;
        }
        let mut rest = &n[first.len()..n.len() - last.len()];
        for mid in middle {
            // The first byte first: most windows fail there, and this runs ~80 patterns times
            // every variable of the environment at each start.
            let head = mid[0].to_ascii_uppercase();
            match rest
                .windows(mid.len())
                .position(|w| w[0].to_ascii_uppercase() == head && w.eq_ignore_ascii_case(mid))
            {
                Some(i) => rest = &rest[i + mid.len()..],
                None => return false,
            }
        }
        true
    }
}

/// A list of names and patterns, asked for its first entry (in list order) that [`matches()`] a
/// name: the plain names (most of a profile's lists) by one hash lookup, only the patterns one
/// by one. Made once per list, asked once per variable of the environment.
pub struct NameSet<'a> {
    /// Each plain name, ASCII upper-cased, with its place in the list and its text.
    plain: std::collections::HashMap<String, (usize, &'a str)>,
    /// The entries with a `*`, in list order, split at their stars.
    patterns: Vec<(usize, &'a str, Pattern<'a>)>,
}

impl<'a> NameSet<'a> {
    pub fn new<S: AsRef<str>>(list: &'a [S]) -> NameSet<'a> {
        let mut plain = std::collections::HashMap::new();
        let mut patterns = Vec::new();
        for (i, entry) in list.iter().map(AsRef::as_ref).enumerate() {
            if entry.contains('*') {
                patterns.push((i, entry, Pattern::of(entry)));
            } else {
                plain
                    .entry(entry.to_ascii_uppercase())
                    .or_insert((i, entry));
            }
        }
        NameSet { plain, patterns }
    }

    /// The first entry of the list that matches `name`.
    pub fn first(&self, name: &str) -> Option<&'a str> {
        let plain = self.plain.get(&name.to_ascii_uppercase()).copied();
        let before = plain.map_or(usize::MAX, |(i, _)| i);
        self.patterns
            .iter()
            .take_while(|(i, ..)| *i < before)
            .find(|(.., p)| p.matches(name))
            .map(|(_, text, _)| *text)
            .or(plain.map(|(_, text)| text))
    }

    /// Whether a plain entry (no `*`) names `name`.
    pub fn names(&self, name: &str) -> bool {
        self.plain.contains_key(&name.to_ascii_uppercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_patterns() {
        assert!(matches("*_TOKEN", "GITHUB_TOKEN"));
        assert!(!matches("*_TOKEN", "TOKENS"));
        assert!(matches("AWS_*", "AWS_SECRET_ACCESS_KEY"));
        assert!(matches("*SECRET_KEY*", "MY_SECRET_KEY_2"));
        assert!(matches("*_TOKEN_*", "A_TOKEN_B"));
        assert!(!matches("*_TOKEN_*", "A_TOKEN"));
        assert!(matches("PATH", "PATH") && !matches("PATH", "PATHS"));
        assert!(matches("LC_*", "LC_ALL"));
    }

    #[test]
    fn a_name_set_answers_as_the_list_in_order() {
        let list: Vec<String> = ["AWS_*", "GITHUB_TOKEN", "*_TOKEN", "home", "H*"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let set = NameSet::new(&list);
        for name in [
            "AWS_KEY",
            "github_token",
            "NPM_TOKEN",
            "HOME",
            "HOST",
            "PATH",
            "GITHUB_TOKENX",
        ] {
            let slow = list.iter().find(|p| matches(p, name)).map(String::as_str);
            assert_eq!(set.first(name), slow, "{name}");
        }
        assert!(set.names("Github_Token") && set.names("HOME") && !set.names("NPM_TOKEN"));
    }
}
