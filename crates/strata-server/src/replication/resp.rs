//! The bits of RESP the replica speaks to its primary: commands out,
//! reply lines in, and the multi-bulk commands of the stream.

use bytes::Bytes;

/// Largest bulk argument of the stream accepted (Redis's
/// `proto-max-bulk-len` default).
const MAX_BULK: usize = 512 << 20;
/// Most arguments of one command.
const MAX_ARGS: usize = 1 << 24;

/// `args` as a RESP array of bulk strings.
pub(super) fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    crate::resp::write_request(&mut out, args);
    out
}

/// One parse of the front of `buf`.
#[derive(Debug, PartialEq)]
pub(super) enum Parsed {
    /// More bytes are needed.
    Incomplete,
    /// A command and the bytes it took (an empty one: a bare newline).
    Command(Vec<Bytes>, usize),
}

/// Finds `\r\n` from `at`: the index of `\r`.
fn line_end(buf: &[u8], at: usize) -> Option<usize> {
    let rest = buf.get(at..)?;
    rest.windows(2).position(|w| w == b"\r\n").map(|i| at + i)
}

/// A decimal number of a header line.
fn number(b: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| format!("bad number in the primary's stream: {:?}", String::from_utf8_lossy(b)))
}

/// Parses one multi-bulk command from the front of `buf`.
pub(super) fn parse(buf: &[u8]) -> Result<Parsed, String> {
    match buf.first() {
        None => return Ok(Parsed::Incomplete),
        // A newline the primary sends to keep the link alive.
        Some(b'\n') => return Ok(Parsed::Command(Vec::new(), 1)),
        Some(b'*') => {}
        Some(other) => return Err(format!("unexpected byte {other:#04x} in the primary's stream")),
    }
    let Some(end) = line_end(buf, 1) else { return Ok(Parsed::Incomplete) };
    let n = number(buf.get(1..end).unwrap_or_default())?;
    let n = usize::try_from(n).map_err(|_| format!("bad array length {n} in the primary's stream"))?;
    if n > MAX_ARGS {
        return Err(format!("array of {n} elements in the primary's stream"));
    }
    let mut at = end + 2;
    let mut args = Vec::with_capacity(n.min(64));
    for _ in 0..n {
        match buf.get(at) {
            None => return Ok(Parsed::Incomplete),
            Some(b'$') => {}
            Some(other) => return Err(format!("expected a bulk string, got {other:#04x}")),
        }
        let Some(end) = line_end(buf, at + 1) else { return Ok(Parsed::Incomplete) };
        let len = number(buf.get(at + 1..end).unwrap_or_default())?;
        let len = usize::try_from(len).map_err(|_| format!("bad bulk length {len}"))?;
        if len > MAX_BULK {
            return Err(format!("bulk string of {len} bytes in the primary's stream"));
        }
        let start = end + 2;
        let Some(data) = buf.get(start..start + len) else { return Ok(Parsed::Incomplete) };
        match buf.get(start + len..start + len + 2) {
            None => return Ok(Parsed::Incomplete),
            Some(b"\r\n") => {}
            Some(_) => return Err("a bulk string not ended by CRLF".into()),
        }
        args.push(Bytes::copy_from_slice(data));
        at = start + len + 2;
    }
    Ok(Parsed::Command(args, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commands_and_waits_for_the_rest() {
        let cmd = encode(&[b"SET", b"k", b"v"]);
        assert_eq!(parse(&cmd[..cmd.len() - 1]).unwrap(), Parsed::Incomplete);
        for cut in 0..cmd.len() {
            assert_eq!(parse(&cmd[..cut]).unwrap(), Parsed::Incomplete, "cut at {cut}");
        }
        let Parsed::Command(args, used) = parse(&cmd).unwrap() else { panic!("whole") };
        assert_eq!(used, cmd.len());
        assert_eq!(args, vec![Bytes::from("SET"), Bytes::from("k"), Bytes::from("v")]);
        assert_eq!(parse(b"\n*1").unwrap(), Parsed::Command(Vec::new(), 1));
        assert!(parse(b"+OK\r\n").is_err());
        assert!(parse(b"*1\r\n$-5\r\n").is_err());
        assert!(parse(b"*1\r\n$2\r\nabXY").is_err());
    }
}
