//! Request parsing: RESP multibulk arrays (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`)
//! and inline commands (`PING\r\n`), with Redis's limits.
//!
//! The parser never allocates by a length the peer declared before those
//! bytes have arrived: it only looks at what is in the buffer.

use bytes::{Buf, Bytes, BytesMut};

/// Request size limits, named after Redis's configuration.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest bulk argument (`proto-max-bulk-len`). Default 512 MiB.
    pub max_bulk_len: usize,
    /// Largest number of arguments in one multibulk request. Default 1,048,576.
    pub max_multibulk_len: usize,
    /// Largest inline request line. Default 64 KiB.
    pub max_inline_len: usize,
    /// Largest unparsed query buffer (`client-query-buffer-limit`). Default 1 GiB.
    pub max_query_buffer: usize,
    /// The client has not authenticated yet: Redis's own, fixed limits
    /// apply on top (see [`Limits::unauthenticated`]).
    pub unauthenticated: bool,
}

/// Most arguments of a request from a client that has not authenticated.
const UNAUTH_MULTIBULK: i64 = 10;

/// Largest argument of a request from a client that has not authenticated.
const UNAUTH_BULK: i64 = 16384;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 << 20,
            max_multibulk_len: 1024 * 1024,
            max_inline_len: 64 << 10,
            max_query_buffer: 1 << 30,
            unauthenticated: false,
        }
    }
}

impl Limits {
    /// These limits for a client that must still authenticate: as in
    /// Redis, at most 10 arguments of at most 16 KiB each, so that anyone
    /// who can connect cannot make the server buffer large requests.
    pub fn unauthenticated(self) -> Limits {
        Limits { unauthenticated: true, ..self }
    }
}

/// Malformed input; the connection is answered with this text and closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    fn new(s: &str) -> ProtocolError {
        ProtocolError(format!("Protocol error: {s}"))
    }
}

/// Parses one request from the front of `buf`, consuming it.
///
/// Returns `Ok(None)` when more bytes are needed, `Ok(Some(args))` for a
/// request (an empty vector for an empty inline line, which gets no reply),
/// or a [`ProtocolError`] for malformed input.
pub fn parse_request(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    match buf.first() {
        None => Ok(None),
        Some(b'*') => parse_multibulk(buf, limits),
        Some(_) => parse_inline(buf, limits),
    }
}

/// Position of the first `\r\n` at or after `from`.
fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let tail = buf.get(from..)?;
    tail.windows(2).position(|w| w == b"\r\n").map(|p| p + from)
}

/// Parses a decimal integer as Redis's `string2ll` does for headers.
fn parse_len(s: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(s).ok()?;
    if text.is_empty() || text.starts_with('+') {
        return None;
    }
    text.parse::<i64>().ok()
}

fn parse_multibulk(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let Some(eol) = find_crlf(buf, 0) else {
        if buf.len() > limits.max_inline_len {
            return Err(ProtocolError::new("too big mbulk count string"));
        }
        return Ok(None);
    };
    let count = buf
        .get(1..eol)
        .and_then(parse_len)
        .filter(|n| *n <= i64::from(i32::MAX))
        .ok_or_else(|| ProtocolError::new("invalid multibulk length"))?;
    // In Redis's order: past INT_MAX, then the unauthenticated limit, then
    // the configured one.
    if limits.unauthenticated && count > UNAUTH_MULTIBULK {
        return Err(ProtocolError::new("unauthenticated multibulk length"));
    }
    if count > limits.max_multibulk_len as i64 {
        return Err(ProtocolError::new("invalid multibulk length"));
    }
    let mut pos = eol + 2;
    if count <= 0 {
        buf.advance(pos);
        return Ok(Some(Vec::new()));
    }
    // First pass: check that every argument is complete, without copying.
    let count = count as usize;
    let mut spans = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        match buf.get(pos) {
            None => return Ok(None),
            Some(b'$') => {}
            Some(&c) => {
                return Err(ProtocolError(format!(
                    "Protocol error: expected '$', got '{}'",
                    char::from(c).escape_default()
                )))
            }
        }
        let Some(eol) = find_crlf(buf, pos) else {
            if buf.len() - pos > limits.max_inline_len {
                return Err(ProtocolError::new("too big bulk count string"));
            }
            return Ok(None);
        };
        let len = buf
            .get(pos + 1..eol)
            .and_then(parse_len)
            .filter(|n| *n >= 0 && *n <= limits.max_bulk_len as i64)
            .ok_or_else(|| ProtocolError::new("invalid bulk length"))?;
        if limits.unauthenticated && len > UNAUTH_BULK {
            return Err(ProtocolError::new("unauthenticated bulk length"));
        }
        let len = len as usize;
        let start = eol + 2;
        let end = start + len;
        if buf.len() < end + 2 {
            return Ok(None);
        }
        if buf.get(end..end + 2) != Some(&b"\r\n"[..]) {
            return Err(ProtocolError::new("invalid bulk format"));
        }
        spans.push((start, end));
        pos = end + 2;
    }
    let frame = buf.split_to(pos).freeze();
    Ok(Some(spans.into_iter().map(|(s, e)| frame.slice(s..e)).collect()))
}

fn parse_inline(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > limits.max_inline_len {
            return Err(ProtocolError::new("too big inline request"));
        }
        return Ok(None);
    };
    if nl > limits.max_inline_len {
        return Err(ProtocolError::new("too big inline request"));
    }
    let line = buf.split_to(nl + 1);
    let body = line.get(..nl).unwrap_or_default();
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    let args = split_inline(body).ok_or_else(|| ProtocolError::new("unbalanced quotes in request"))?;
    Ok(Some(args.into_iter().map(Bytes::from).collect()))
}

/// Splits an inline line into arguments like Redis's `sdssplitargs`:
/// spaces separate, "double quotes" take \n \r \t \b \a \\ \" \xHH escapes,
/// 'single quotes' take only \'. `None` for unbalanced quotes.
pub fn split_inline(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    let at = |i: usize| line.get(i).copied();
    loop {
        while at(i).is_some_and(|c| c.is_ascii_whitespace()) {
            i += 1;
        }
        if i >= line.len() {
            return Some(out);
        }
        let mut cur = Vec::new();
        match at(i) {
            Some(b'"') => {
                i += 1;
                loop {
                    match at(i)? {
                        b'\\' => {
                            let hex = |c: Option<u8>| c.and_then(|c| (c as char).to_digit(16));
                            if at(i + 1) == Some(b'x') {
                                if let (Some(h), Some(l)) = (hex(at(i + 2)), hex(at(i + 3))) {
                                    cur.push((h * 16 + l) as u8);
                                    i += 4;
                                    continue;
                                }
                            }
                            let c = at(i + 1)?;
                            cur.push(match c {
                                b'n' => b'\n',
                                b'r' => b'\r',
                                b't' => b'\t',
                                b'b' => 8,
                                b'a' => 7,
                                other => other,
                            });
                            i += 2;
                        }
                        b'"' => {
                            i += 1;
                            if at(i).is_some_and(|c| !c.is_ascii_whitespace()) {
                                return None;
                            }
                            break;
                        }
                        c => {
                            cur.push(c);
                            i += 1;
                        }
                    }
                }
            }
            Some(b'\'') => {
                i += 1;
                loop {
                    match at(i)? {
                        b'\\' if at(i + 1) == Some(b'\'') => {
                            cur.push(b'\'');
                            i += 2;
                        }
                        b'\'' => {
                            i += 1;
                            if at(i).is_some_and(|c| !c.is_ascii_whitespace()) {
                                return None;
                            }
                            break;
                        }
                        c => {
                            cur.push(c);
                            i += 1;
                        }
                    }
                }
            }
            _ => {
                while let Some(c) = at(i) {
                    if c.is_ascii_whitespace() {
                        break;
                    }
                    cur.push(c);
                    i += 1;
                }
            }
        }
        out.push(cur);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(args) = parse_request(&mut buf, &Limits::default())? {
            out.push(args.iter().map(|a| a.to_vec()).collect());
        }
        Ok(out)
    }

    #[test]
    fn multibulk_and_inline() {
        let got = parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\nset a \"b c\"\r\n").unwrap();
        assert_eq!(got[0], vec![b"GET".to_vec(), b"k".to_vec()]);
        assert_eq!(got[1], vec![b"PING".to_vec()]);
        assert_eq!(got[2], vec![b"set".to_vec(), b"a".to_vec(), b"b c".to_vec()]);
    }

    #[test]
    fn every_split_point_waits_for_more() {
        let full = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n";
        for cut in 0..full.len() {
            let mut buf = BytesMut::from(&full[..cut]);
            assert_eq!(parse_request(&mut buf, &Limits::default()).unwrap(), None, "cut {cut}");
        }
    }

    #[test]
    fn redis_protocol_tcl_cases() {
        assert!(parse_all(b"*-10\r\n").unwrap()[0].is_empty());
        assert_eq!(parse_all(b"*3000000000\r\n").unwrap_err().0, "Protocol error: invalid multibulk length");
        assert_eq!(parse_all(b"*1\r\n$-10\r\n").unwrap_err().0, "Protocol error: invalid bulk length");
        assert_eq!(parse_all(b"*1\r\n$2000000000\r\n").unwrap_err().0, "Protocol error: invalid bulk length");
        assert_eq!(parse_all(b"*1\r\n$blabla\r\n").unwrap_err().0, "Protocol error: invalid bulk length");
        // A client that must still authenticate: Redis's fixed limits.
        let unauth = Limits::default().unauthenticated();
        let mut b = BytesMut::from(&b"*11\r\n"[..]);
        assert_eq!(parse_request(&mut b, &unauth).unwrap_err().0, "Protocol error: unauthenticated multibulk length");
        let mut b = BytesMut::from(&b"*2000000\r\n"[..]);
        assert_eq!(parse_request(&mut b, &unauth).unwrap_err().0, "Protocol error: unauthenticated multibulk length");
        let mut b = BytesMut::from(&b"*3000000000\r\n"[..]);
        assert_eq!(parse_request(&mut b, &unauth).unwrap_err().0, "Protocol error: invalid multibulk length");
        let mut b = BytesMut::from(&b"*1\r\n$16385\r\n"[..]);
        assert_eq!(parse_request(&mut b, &unauth).unwrap_err().0, "Protocol error: unauthenticated bulk length");
        let mut b = BytesMut::from(&b"*1\r\n$-1\r\n"[..]);
        assert_eq!(parse_request(&mut b, &unauth).unwrap_err().0, "Protocol error: invalid bulk length");
        let mut b = BytesMut::from(&b"*2\r\n$4\r\nAUTH\r\n$3\r\npw!\r\n"[..]);
        assert_eq!(parse_request(&mut b, &unauth).unwrap().map(|a| a.len()), Some(2));
        assert_eq!(parse_all(b"*1\r\nfoo\r\n").unwrap_err().0, "Protocol error: expected '$', got 'f'");
        assert_eq!(parse_all(b"set \"a\r\n").unwrap_err().0, "Protocol error: unbalanced quotes in request");
        assert_eq!(parse_all(b"*1\r\n$3\r\nfooXX").unwrap_err().0, "Protocol error: invalid bulk format");
    }

    #[test]
    fn huge_inline_is_refused() {
        let big = vec![b'a'; 70_000];
        assert_eq!(parse_all(&big).unwrap_err().0, "Protocol error: too big inline request");
    }

    #[test]
    fn empty_line_is_an_empty_request() {
        assert_eq!(parse_all(b"\r\n").unwrap(), vec![Vec::<Vec<u8>>::new()]);
    }

    #[test]
    fn inline_escapes() {
        assert_eq!(
            split_inline(b"a \"\\x41\\n\" 'it\\'s'").unwrap(),
            vec![b"a".to_vec(), b"A\n".to_vec(), b"it's".to_vec()]
        );
        assert!(split_inline(b"\"abc\"def").is_none());
    }
}
