//! Redis glob patterns (`*`, `?`, `[abc]`, `[^a-z]`, `\x`) for SCAN MATCH,
//! KEYS and CONFIG GET.
//!
//! Matching backtracks only to the most recent `*`, so it runs in
//! O(pattern × text) at worst, whatever the pattern.

/// Redis gives up (no match) once matching goes through more `*`s than
/// this (its recursion limit against abusive patterns; Redis's own test
/// "Regression for pattern matching very long nested loops").
const MAX_NESTING: usize = 1000;

/// Whether `text` matches `pattern`.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    let mut stars = 0usize;
    while t < text.len() {
        if let Some((np, ok)) = step(pattern, p, text.get(t).copied()) {
            if ok {
                p = np;
                t += 1;
                continue;
            }
        } else if pattern.get(p) == Some(&b'*') {
            while pattern.get(p) == Some(&b'*') {
                p += 1;
            }
            // A trailing `*` matches at once; any other goes one level deeper.
            if p < pattern.len() {
                stars += 1;
                if stars > MAX_NESTING {
                    return false;
                }
            }
            star = Some((p, t));
            continue;
        }
        match star {
            Some((sp, st)) => {
                p = sp;
                t = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    while pattern.get(p) == Some(&b'*') {
        p += 1;
    }
    p >= pattern.len()
}

/// Matches one text byte against the pattern element at `p`. Returns the
/// position after that element and whether it matched, or `None` at a `*`
/// or at the end of the pattern.
fn step(pattern: &[u8], p: usize, c: Option<u8>) -> Option<(usize, bool)> {
    let c = c?;
    match *pattern.get(p)? {
        b'*' => None,
        b'?' => Some((p + 1, true)),
        b'\\' if p + 1 < pattern.len() => Some((p + 2, pattern.get(p + 1) == Some(&c))),
        b'[' => {
            let mut i = p + 1;
            let negate = pattern.get(i) == Some(&b'^');
            if negate {
                i += 1;
            }
            let mut matched = false;
            loop {
                match pattern.get(i) {
                    None => {
                        // Unterminated class: Redis treats the end as closing it.
                        break;
                    }
                    Some(b']') => {
                        i += 1;
                        break;
                    }
                    Some(b'\\') => {
                        if pattern.get(i + 1) == Some(&c) {
                            matched = true;
                        }
                        i += 2;
                    }
                    Some(&lo)
                        if pattern.get(i + 1) == Some(&b'-') && pattern.get(i + 2).is_some_and(|&x| x != b']') =>
                    {
                        let hi = pattern.get(i + 2).copied().unwrap_or(lo);
                        let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
                        if c >= lo && c <= hi {
                            matched = true;
                        }
                        i += 3;
                    }
                    Some(&x) => {
                        if x == c {
                            matched = true;
                        }
                        i += 1;
                    }
                }
            }
            Some((i, matched != negate))
        }
        x => Some((p + 1, x == c)),
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn patterns() {
        let m = |p: &str, t: &str| glob_match(p.as_bytes(), t.as_bytes());
        assert!(m("*", ""));
        assert!(m("*", "abc"));
        assert!(m("user:*", "user:42"));
        assert!(!m("user:*", "usr:42"));
        assert!(m("h?llo", "hello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("a\\*b", "a*b"));
        assert!(!m("a\\*b", "axb"));
        assert!(m("*a*b*c*", "xxaxxbxxcxx"));
        assert!(!m("a*", "b"));
        assert!(m("save", "save"));
    }

    #[test]
    fn pathological_pattern_is_fast() {
        let text = "a".repeat(2000);
        let pat = format!("{}b", "*a".repeat(50));
        assert!(!glob_match(pat.as_bytes(), text.as_bytes()));
    }

    #[test]
    fn more_nested_stars_than_redis_allows_match_nothing() {
        let text = "a".repeat(2000);
        assert!(glob_match("*?".repeat(1000).as_bytes(), text.as_bytes()));
        assert!(!glob_match("*?".repeat(1001).as_bytes(), text.as_bytes()));
        // A trailing star adds no level.
        assert!(glob_match(format!("{}*", "?*".repeat(999)).as_bytes(), text.as_bytes()));
    }
}
