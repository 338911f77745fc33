//! A minimal RESP2 client for driving `strata-server` (kill and limits modes).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{bail, Context};

/// One reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`
    Simple(String),
    /// `-ERR ...`
    Error(String),
    /// `:n`
    Int(i64),
    /// `$n` (None for `$-1`)
    Bulk(Option<Vec<u8>>),
    /// `*n` (None for `*-1`)
    Array(Option<Vec<Reply>>),
}

/// A connection to a RESP server.
pub struct Client {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

/// Encodes a command as a RESP array of bulk strings.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

impl Client {
    /// Connects to `addr` (with a read timeout so a dead server is noticed).
    pub fn connect(addr: &str) -> anyhow::Result<Client> {
        let s = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        let w = s.try_clone()?;
        Ok(Client { r: BufReader::new(s), w })
    }

    /// Sends one command and reads its reply.
    pub fn call(&mut self, args: &[&[u8]]) -> anyhow::Result<Reply> {
        self.w.write_all(&encode(args))?;
        self.read_reply()
    }

    /// Sends raw bytes.
    pub fn send_raw(&mut self, b: &[u8]) -> anyhow::Result<()> {
        self.w.write_all(b)?;
        Ok(())
    }

    /// Reads one reply.
    pub fn read_reply(&mut self) -> anyhow::Result<Reply> {
        let mut line = Vec::new();
        self.r.read_until(b'\n', &mut line)?;
        if line.is_empty() {
            bail!("connection closed");
        }
        if !line.ends_with(b"\r\n") {
            bail!("reply line without CRLF");
        }
        line.truncate(line.len() - 2);
        let (kind, rest) = line.split_first().context("empty reply line")?;
        let text = String::from_utf8_lossy(rest).into_owned();
        Ok(match kind {
            b'+' => Reply::Simple(text),
            b'-' => Reply::Error(text),
            b':' => Reply::Int(text.parse().context("bad integer reply")?),
            b'$' => {
                let n: i64 = text.parse().context("bad bulk length")?;
                if n < 0 {
                    Reply::Bulk(None)
                } else {
                    let mut b = vec![0u8; n as usize + 2];
                    self.r.read_exact(&mut b)?;
                    b.truncate(n as usize);
                    Reply::Bulk(Some(b))
                }
            }
            b'*' => {
                let n: i64 = text.parse().context("bad array length")?;
                if n < 0 {
                    Reply::Array(None)
                } else {
                    let mut items = Vec::with_capacity(n as usize);
                    for _ in 0..n {
                        items.push(self.read_reply()?);
                    }
                    Reply::Array(Some(items))
                }
            }
            other => bail!("unknown reply type {:?}", *other as char),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_commands() {
        assert_eq!(encode(&[b"GET", b"k"]), b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".to_vec());
    }
}
