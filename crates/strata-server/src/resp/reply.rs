//! Replies and their encoding in RESP2 or RESP3.
//!
//! RESP3 types degrade in RESP2 as Redis does: maps and sets become flat
//! arrays, doubles become bulk strings, the null becomes `$-1` (or `*-1`
//! for a null array).

use bytes::Bytes;

/// One reply to a command.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+OK`.
    Simple(&'static str),
    /// A status line built at run time (`+PONG`-like).
    Status(String),
    /// `-ERR ...`: the full text after the `-`, prefix included.
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$n` bulk string.
    Bulk(Bytes),
    /// Null bulk string (`$-1`, or `_` in RESP3).
    Nil,
    /// Null array (`*-1`, or `_` in RESP3).
    NilArray,
    /// `*n` array.
    Array(Vec<Reply>),
    /// `%n` map (flat array in RESP2).
    Map(Vec<(Reply, Reply)>),
    /// `~n` set (array in RESP2).
    Set(Vec<Reply>),
    /// `,d` double (bulk string in RESP2).
    Double(f64),
    /// `>n` push frame (pub/sub; an array in RESP2). Sent even while
    /// CLIENT REPLY is OFF, as Redis does.
    Push(Vec<Reply>),
    /// Several replies of one command, one after another (SUBSCRIBE to n
    /// channels answers n frames).
    Many(Vec<Reply>),
    /// `#t` / `#f` boolean (`:1` / `:0` in RESP2).
    Bool(bool),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Simple("OK")
    }

    /// A bulk string copied from bytes.
    pub fn bulk(b: impl AsRef<[u8]>) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(b.as_ref()))
    }

    /// A bulk string taking ownership of a vector.
    pub fn bulk_vec(v: Vec<u8>) -> Reply {
        Reply::Bulk(Bytes::from(v))
    }

    /// An error reply with the given text (prefix included, e.g. `ERR x`).
    pub fn err(s: impl Into<String>) -> Reply {
        Reply::Error(s.into())
    }

    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Whether this reply is a push (or only pushes): it is sent even when
    /// CLIENT REPLY silences the command's reply.
    pub fn is_push(&self) -> bool {
        match self {
            Reply::Push(_) => true,
            Reply::Many(items) => items.iter().all(Reply::is_push),
            _ => false,
        }
    }

    /// Appends the encoding for protocol version `proto` (2 or 3) to `out`.
    pub fn encode(&self, proto: u8, out: &mut Vec<u8>) {
        let resp3 = proto >= 3;
        match self {
            Reply::Simple(s) => line(out, b'+', s.as_bytes()),
            Reply::Status(s) => line(out, b'+', s.as_bytes()),
            Reply::Error(s) => {
                // Error texts must stay on one line.
                let clean: Vec<u8> = s.bytes().map(|c| if c == b'\r' || c == b'\n' { b' ' } else { c }).collect();
                line(out, b'-', &clean)
            }
            Reply::Int(n) => {
                out.push(b':');
                push_int(out, *n);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Bulk(b) => bulk(out, b),
            Reply::Nil if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::NilArray if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) => {
                header(out, b'*', items.len());
                for i in items {
                    i.encode(proto, out);
                }
            }
            Reply::Push(items) => {
                header(out, if resp3 { b'>' } else { b'*' }, items.len());
                for i in items {
                    i.encode(proto, out);
                }
            }
            Reply::Many(items) => {
                for i in items {
                    i.encode(proto, out);
                }
            }
            Reply::Set(items) => {
                header(out, if resp3 { b'~' } else { b'*' }, items.len());
                for i in items {
                    i.encode(proto, out);
                }
            }
            Reply::Map(pairs) => {
                if resp3 {
                    header(out, b'%', pairs.len());
                } else {
                    header(out, b'*', pairs.len() * 2);
                }
                for (k, v) in pairs {
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
            Reply::Bool(b) if resp3 => out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            Reply::Bool(b) => out.extend_from_slice(if *b { b":1\r\n" } else { b":0\r\n" }),
            Reply::Double(d) => {
                let text = format_double(*d);
                if resp3 {
                    line(out, b',', text.as_bytes());
                } else {
                    bulk(out, text.as_bytes());
                }
            }
        }
    }
}

fn line(out: &mut Vec<u8>, tag: u8, body: &[u8]) {
    out.push(tag);
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

/// Appends the decimal text of `n` (no allocation).
pub(crate) fn push_int(out: &mut Vec<u8>, n: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        if let Some(d) = buf.get_mut(i) {
            *d = b'0' + (v % 10) as u8;
        }
        v /= 10;
        if v == 0 || i == 0 {
            break;
        }
    }
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(buf.get(i..).unwrap_or_default());
}

/// `tag` + a length + CRLF (`*3\r\n`, `$5\r\n`).
fn header(out: &mut Vec<u8>, tag: u8, len: usize) {
    out.push(tag);
    push_int(out, len as i64);
    out.extend_from_slice(b"\r\n");
}

fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    header(out, b'$', b.len());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// Formats a double with the fewest digits that read back to the same
/// value (as Redis 7.2 does; 7.0 prints 17), laid out as Redis 7.0's
/// `%.17g`: integers below 1e17 in full, larger magnitudes as `1.5e+20`;
/// `inf`/`-inf` for infinities.
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        "nan".to_string()
    } else if d.is_infinite() {
        if d > 0.0 { "inf" } else { "-inf" }.to_string()
    } else if d.abs() >= 1e17 {
        scientific(d)
    } else if d == d.trunc() {
        format!("{}", d as i64)
    } else {
        let plain = format!("{d}");
        if plain.len() > 24 {
            scientific(d)
        } else {
            plain
        }
    }
}

/// `d` as shortest digits with a signed exponent of at least two digits,
/// as printf's `%g` writes it (`1.5e+20`, `1.25e-08`).
fn scientific(d: f64) -> String {
    let s = format!("{d:e}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = exp.strip_prefix('-').map_or(('+', exp), |e| ('-', e));
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(r: &Reply, proto: u8) -> String {
        let mut out = Vec::new();
        r.encode(proto, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn resp2_and_resp3_shapes() {
        let m = Reply::Map(vec![(Reply::bulk("a"), Reply::Int(1))]);
        assert_eq!(enc(&m, 2), "*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&m, 3), "%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&Reply::Nil, 2), "$-1\r\n");
        assert_eq!(enc(&Reply::NilArray, 2), "*-1\r\n");
        assert_eq!(enc(&Reply::Nil, 3), "_\r\n");
        assert_eq!(enc(&Reply::Double(1.5), 2), "$3\r\n1.5\r\n");
        assert_eq!(enc(&Reply::Double(f64::INFINITY), 3), ",inf\r\n");
        assert_eq!(enc(&Reply::Set(vec![Reply::bulk("x")]), 3), "~1\r\n$1\r\nx\r\n");
        assert_eq!(enc(&Reply::err("ERR a\r\nb"), 2), "-ERR a  b\r\n");
        assert_eq!(enc(&Reply::Int(0), 2), ":0\r\n");
        assert_eq!(enc(&Reply::Int(-1234567), 2), ":-1234567\r\n");
        assert_eq!(enc(&Reply::Int(i64::MIN), 2), ":-9223372036854775808\r\n");
        assert_eq!(enc(&Reply::Int(i64::MAX), 2), ":9223372036854775807\r\n");
    }

    #[test]
    fn doubles() {
        assert_eq!(format_double(3.0), "3");
        assert_eq!(format_double(-0.5), "-0.5");
        assert_eq!(format_double(1.1), "1.1");
        assert_eq!(format_double(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_double(1e16), "10000000000000000");
        assert_eq!(format_double(1.5e20), "1.5e+20");
        assert_eq!(format_double(-1e21), "-1e+21");
        assert_eq!(format_double(f64::MAX), "1.7976931348623157e+308");
        assert_eq!(format_double(0.00001), "0.00001");
        assert_eq!(format_double(1.25e-8), "0.0000000125");
        assert_eq!(format_double(1.2345678901234567e-8), "1.2345678901234567e-08");
        assert_eq!(format_double(1e-300), "1e-300");
        for d in [1.5e20, f64::MAX, 1.2345678901234567e-8, 1e-300, 123.456, -7e100] {
            assert_eq!(format_double(d).parse::<f64>().unwrap(), d);
        }
    }
}
