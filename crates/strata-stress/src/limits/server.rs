//! Server limits: `maxclients` reached (clear error, others unaffected),
//! thousands of connections, a bulk over `proto-max-bulk-len`, a key over
//! the engine's limit; the server stays up and answers PING throughout.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::kill::server::{free_port, spawn_server, wait_ready};
use crate::report::Report;
use crate::resp_client::{Client, Reply};

fn ping(addr: &str) -> bool {
    Client::connect(addr)
        .and_then(|mut c| c.call(&[b"PING"]))
        .map(|r| r == Reply::Simple("PONG".into()))
        .unwrap_or(false)
}

/// Waits (bounded) until a fresh connection answers PING.
fn ping_soon(addr: &str) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if ping(addr) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Runs the server checks with the binary `bin` and data under `root`.
pub fn server_limits(bin: &Path, root: &Path, connections: usize, rep: &mut Report) -> Result<(), String> {
    let dir = root.join("server");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let port = free_port().map_err(|e| e.to_string())?;
    let mut srv =
        spawn_server(bin, &dir, port, &["--maxclients", "50", "--proto-max-bulk-len", "1mb", "--durability", "sync"])
            .map_err(|e| e.to_string())?;
    let r = limited(&mut srv, port, rep);
    let _ = srv.kill();
    let _ = srv.wait();
    r?;
    let port = free_port().map_err(|e| e.to_string())?;
    let mut srv = spawn_server(bin, &dir, port, &[]).map_err(|e| e.to_string())?;
    let r = many(&mut srv, port, connections, rep);
    let _ = srv.kill();
    let _ = srv.wait();
    r
}

fn limited(srv: &mut std::process::Child, port: u16, rep: &mut Report) -> Result<(), String> {
    if !wait_ready(srv, port).map_err(|e| e.to_string())? {
        return Err("strata-server did not start".into());
    }
    let addr = format!("127.0.0.1:{port}");
    // maxclients = 50: the 51st and later get an error (or are closed).
    let mut held = Vec::new();
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..60 {
        let Ok(mut c) = Client::connect(&addr) else {
            refused += 1;
            continue;
        };
        match c.call(&[b"PING"]) {
            Ok(Reply::Simple(s)) if s == "PONG" => {
                accepted += 1;
                held.push(c);
            }
            Ok(Reply::Error(e)) if e.contains("max") => refused += 1,
            Ok(other) => return Err(format!("connection over maxclients got {other:?}")),
            Err(_) => refused += 1,
        }
    }
    if accepted > 50 || refused == 0 {
        return Err(format!("maxclients 50: {accepted} connections accepted, {refused} refused"));
    }
    rep.add("maxclients_refused", refused);
    let Some(first) = held.first_mut() else {
        return Err("no connection accepted".into());
    };
    if first.call(&[b"PING"]).map_err(|e| e.to_string())? != Reply::Simple("PONG".into()) {
        return Err("an accepted client stopped answering once maxclients was reached".into());
    }
    // A key over the engine's 64 KiB limit: an error reply, not OK.
    let long_key = vec![b'k'; (64 << 10) + 1];
    match first.call(&[b"SET", &long_key, b"v"]).map_err(|e| e.to_string())? {
        Reply::Error(_) => rep.add("server_over_limit_keys_refused", 1),
        other => return Err(format!("SET of a 64 KiB + 1 key answered {other:?}")),
    }
    // A value just under proto-max-bulk-len is stored.
    let v = vec![b'v'; 900 << 10];
    if first.call(&[b"SET", b"big", &v]).map_err(|e| e.to_string())? != Reply::Simple("OK".into())
        || first.call(&[b"GET", b"big"]).map_err(|e| e.to_string())? != Reply::Bulk(Some(v))
    {
        return Err("a 900 KiB value under proto-max-bulk-len did not round-trip".into());
    }
    // A bulk over proto-max-bulk-len (1 MiB): a protocol error, announced
    // before the bytes are sent (nothing is allocated by the claimed size).
    let mut bad = held.pop().ok_or("no connection")?;
    bad.send_raw(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000000\r\n").map_err(|e| e.to_string())?;
    match bad.read_reply() {
        Ok(Reply::Error(e)) if e.to_ascii_lowercase().contains("bulk") => rep.add("server_over_limit_bulks_refused", 1),
        Ok(other) => return Err(format!("a 2 GB bulk header got {other:?}")),
        Err(_) => rep.add("server_over_limit_bulks_refused", 1),
    }
    drop(held);
    drop(bad);
    if !ping_soon(&addr) {
        return Err("the server did not accept a client after others disconnected".into());
    }
    Ok(())
}

fn many(srv: &mut std::process::Child, port: u16, n: usize, rep: &mut Report) -> Result<(), String> {
    if !wait_ready(srv, port).map_err(|e| e.to_string())? {
        return Err("strata-server did not start".into());
    }
    let addr = format!("127.0.0.1:{port}");
    let mut conns = Vec::new();
    for i in 0..n {
        match Client::connect(&addr) {
            Ok(c) => conns.push(c),
            // Our own descriptor limit: report how far we got.
            Err(e) if i > 100 => {
                rep.add("connections_fd_limited", 1);
                eprintln!("limits: stopped at {i} connections: {e}");
                break;
            }
            Err(e) => return Err(format!("connection {i} failed: {e}")),
        }
    }
    for (i, c) in conns.iter_mut().enumerate() {
        let key = format!("conn-{i}");
        if c.call(&[b"SET", key.as_bytes(), b"x"]).map_err(|e| format!("connection {i}: {e}"))?
            != Reply::Simple("OK".into())
        {
            return Err(format!("SET on connection {i} of {n} failed"));
        }
    }
    if !ping(&addr) {
        return Err(format!("a new client got no PONG with {} connections open", conns.len()));
    }
    rep.add("connections_held", conns.len() as u64);
    Ok(())
}
