//! Helpers shared by the integration tests: start the built binary on a
//! free port with its data in a given directory, and compare reply bytes.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running server; dropping it kills it (SIGKILL).
pub struct Server {
    pub child: Child,
    pub port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub fn start(dir: &Path, extra: &[&str]) -> Server {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_strata-server"))
        .args(["--port", &port.to_string(), "--dir"])
        .arg(dir)
        .args(["--pm-size", "128mb"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let srv = Server { child, port };
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            if s.write_all(b"PING\r\n").is_ok() {
                let mut b = [0u8; 7];
                if s.read_exact(&mut b).is_ok() && &b == b"+PONG\r\n" {
                    return srv;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("server did not start"); // dropping `srv` kills and reaps the process
}

pub fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// Sends `req` and reads exactly `want.len()` bytes, which must equal `want`.
pub fn roundtrip(s: &mut TcpStream, req: &[u8], want: &[u8]) {
    s.write_all(req).unwrap();
    let mut got = vec![0u8; want.len()];
    s.read_exact(&mut got).unwrap();
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
}

pub fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// Reads one `$N\r\n...\r\n` bulk reply and returns its payload.
pub fn read_bulk(s: &mut TcpStream) -> Vec<u8> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n") {
        s.read_exact(&mut b).unwrap();
        head.push(b[0]);
    }
    assert_eq!(head.first(), Some(&b'$'), "{}", String::from_utf8_lossy(&head));
    let n: usize = std::str::from_utf8(&head[1..head.len() - 2]).unwrap().parse().unwrap();
    let mut body = vec![0u8; n + 2];
    s.read_exact(&mut body).unwrap();
    body.truncate(n);
    body
}

/// The value of `field` in `INFO section`.
pub fn info_field(s: &mut TcpStream, section: &str, field: &str) -> String {
    s.write_all(format!("INFO {section}\r\n").as_bytes()).unwrap();
    let text = String::from_utf8(read_bulk(s)).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
}

/// Waits (at most 30 s) for the server's process to exit; its exit code.
pub fn wait_exit(srv: &mut Server) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Some(st) = srv.child.try_wait().unwrap() {
            return st.code().unwrap_or(-1);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("server did not exit");
}

/// A request in RESP (a multi-bulk of `args`).
pub fn req(args: &[&str]) -> Vec<u8> {
    req_bytes(&args.iter().map(|a| a.as_bytes()).collect::<Vec<_>>())
}

/// A request in RESP of binary arguments.
pub fn req_bytes(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Reads one line reply (`+...`, `-...`, `:...`), without its CRLF.
pub fn read_line(s: &mut TcpStream) -> String {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        s.read_exact(&mut b).unwrap();
        line.push(b[0]);
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).unwrap()
}
