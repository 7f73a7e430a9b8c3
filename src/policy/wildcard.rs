//! Name patterns as profiles write them (`AWS_*`, `*_TOKEN`): one `*` or more, ASCII case
//! ignored.

/// `*` matches any run of characters; everything else matches itself, ignoring ASCII case
/// (`github_token` is as secret as `GITHUB_TOKEN`). No allocation: it runs for every pattern and
/// every variable at each launch.
pub fn matches(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (Some(star), Some(last_star)) = (
        p.iter().position(|&c| c == b'*'),
        p.iter().rposition(|&c| c == b'*'),
    ) else {
        return p.eq_ignore_ascii_case(n);
    };
    let (first, last) = (&p[..star], &p[last_star + 1..]);
    if n.len() < first.len() + last.len()
        || !n[..first.len()].eq_ignore_ascii_case(first)
        || !n[n.len() - last.len()..].eq_ignore_ascii_case(last)
    {
        return false;
    }
    let mut rest = &n[first.len()..n.len() - last.len()];
    let middle = if last_star > star {
        &p[star + 1..last_star]
    } else {
        &[][..]
    };
    for mid in middle.split(|&c| c == b'*').filter(|m| !m.is_empty()) {
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
}
