//! Number parsing with Redis's rules: strict integers (`string2ll`) and
//! `strtod`-style floats (exponents, `inf`, `+inf`, `-inf`; no NaN).

/// Parses a signed 64-bit integer: optional `-`, no `+`, no spaces, no
/// leading zeros (except `0` itself).
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let digits = s.strip_prefix(b"-").unwrap_or(s);
    match digits {
        [] => return None,
        [b'0'] if s.len() == 1 => return Some(0),
        [b'0', ..] => return None,
        _ => {}
    }
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// Parses a float as Redis does for scores and increments: `strtod`
/// syntax, no surrounding spaces, NaN refused.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(s).ok()?;
    if text.is_empty() || text.starts_with(char::is_whitespace) || text.ends_with(char::is_whitespace) {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    let v = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => {
            if lower.contains("nan") || lower.contains("inf") {
                return None;
            }
            let v = lower.parse::<f64>().ok()?;
            // strtod's ERANGE, which Redis refuses: an overflow to infinity
            // (1e309), or an underflow to zero of a non-zero number (1e-400).
            let mantissa = lower.split('e').next().unwrap_or_default();
            if v.is_infinite() || (v == 0.0 && mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b))) {
                return None;
            }
            v
        }
    };
    (!v.is_nan()).then_some(v)
}

/// A score-range bound for ZRANGEBYSCORE: value and whether it is exclusive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreBound {
    /// The bound value.
    pub value: f64,
    /// `(` prefix: the bound itself is not included.
    pub exclusive: bool,
}

impl ScoreBound {
    /// Parses `1.5`, `(1.5`, `-inf`, `+inf`.
    pub fn parse(s: &[u8]) -> Option<ScoreBound> {
        match s.strip_prefix(b"(") {
            Some(rest) => Some(ScoreBound { value: parse_f64(rest)?, exclusive: true }),
            None => Some(ScoreBound { value: parse_f64(s)?, exclusive: false }),
        }
    }

    /// Whether `v` is at or above this bound taken as a minimum.
    pub fn below(&self, v: f64) -> bool {
        if self.exclusive {
            v > self.value
        } else {
            v >= self.value
        }
    }

    /// Whether `v` is at or below this bound taken as a maximum.
    pub fn above(&self, v: f64) -> bool {
        if self.exclusive {
            v < self.value
        } else {
            v <= self.value
        }
    }
}

/// Parses `512mb`, `1gb`, `4096`, `64k` (Redis memory units).
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim().to_ascii_lowercase();
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(digits_end);
    let n: u64 = num.parse().ok()?;
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mul)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [&b""[..], b"-", b"+1", b" 1", b"1 ", b"01", b"-0", b"1.0", b"9223372036854775808", b"abc"] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn floats() {
        assert_eq!(parse_f64(b"-1.23456789E9"), Some(-1.23456789e9));
        assert_eq!(parse_f64(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"Infinity"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"3"), Some(3.0));
        assert_eq!(parse_f64(b".5"), Some(0.5));
        // strtod's ERANGE is refused, as Redis does; subnormals and zero are fine.
        assert_eq!(parse_f64(b"1e309"), None);
        assert_eq!(parse_f64(b"-1e400"), None);
        assert_eq!(parse_f64(b"1e-400"), None);
        assert_eq!(parse_f64(b"5e-324"), Some(5e-324));
        assert_eq!(parse_f64(b"0e-400"), Some(0.0));
        assert_eq!(parse_f64(b"0.000"), Some(0.0));
        for bad in [&b""[..], b"nan", b"NaN", b" 1", b"1x", b"inff"] {
            assert_eq!(parse_f64(bad), None);
        }
    }

    #[test]
    fn bounds() {
        let b = ScoreBound::parse(b"(1").unwrap();
        assert!(b.exclusive && !b.below(1.0) && b.below(1.5));
        assert!(ScoreBound::parse(b"(").is_none());
        assert!(ScoreBound::parse(b"-inf").unwrap().below(f64::MIN));
    }
}
