//! The replication thread: connects to the primary, does Redis's
//! handshake (PING, AUTH, REPLCONF, PSYNC), and either continues from the
//! primary's backlog (`+CONTINUE [newid]`: PSYNC named our replication id
//! and the next byte's offset) or loads the RDB image it sends
//! (`+FULLRESYNC`: disk-backed `$<len>` or diskless `$EOF:<mark>`) key by
//! key; then applies its command stream, acknowledging the offset every
//! second. Every batch of the stream applied is appended as it came to our
//! own stream (PSYNC2: sub-replicas see the primary's bytes at its
//! offsets), under `State::apply_lock` so a sub-replica's image matches
//! its offset. On any failure it reconnects, with backoff, and PSYNCs.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::end::End;
use super::resp::{encode, parse, Parsed};
use super::{Applier, ApplierFactory, Link, State};

/// How often the stream loop wakes without data (ACKs, stop checks).
const TICK: Duration = Duration::from_millis(100);
/// Longest wait between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Errors of applied commands logged per sync (the rest are counted).
const LOGGED_ERRORS: u32 = 10;

/// The thread's body: sessions with `host:port` until REPLICAOF changes
/// (`generation` is no longer the current one) or the server stops.
pub(super) fn run(state: &Arc<State>, factory: ApplierFactory, host: String, port: u16, generation: u64) {
    // The master client outlives a link and a REPLICAOF (Redis's cached
    // master): a partial resync continues in the database it selected.
    let cached = state.master_client.lock().take();
    let Some(mut applier) = cached.or_else(|| factory()) else { return };
    sessions(state, applier.as_mut(), host, port, generation);
    *state.master_client.lock() = Some(applier);
}

/// Sessions with `host:port` until the thread must stop.
fn sessions(state: &Arc<State>, applier: &mut dyn Applier, host: String, port: u16, generation: u64) {
    let mut backoff = Duration::from_millis(100);
    loop {
        if state.stale(generation) || applier.stopping() {
            return;
        }
        // A transaction the link cut is dropped: PSYNC resends it whole
        // (the offset stops before its MULTI).
        applier.discard();
        // DEBUG SLEEP holds the apply lock: a frozen server does not
        // reconnect either.
        drop(state.apply_lock.lock());
        state.set_link(generation, Link::Connecting);
        let mut synced = false;
        match session(state, applier, &host, port, generation, &mut synced) {
            End::Stopped => return,
            End::Failed(e) => eprintln!("strata-server: replication from {host}:{port}: {e}; reconnecting"),
        }
        state.set_link(generation, Link::Connect);
        if synced {
            backoff = Duration::from_millis(100);
        }
        let until = Instant::now() + backoff;
        while Instant::now() < until {
            if state.stale(generation) || applier.stopping() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Reads one reply line (without its CRLF).
fn line(r: &mut impl BufRead) -> Result<String, End> {
    let mut v = Vec::new();
    if let Err(e) = r.read_until(b'\n', &mut v) {
        // Redis's words, which operators and its tests look for.
        return Err(match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                End::Failed("Timeout connecting to the MASTER...".into())
            }
            _ => e.into(),
        });
    }
    if v.last() != Some(&b'\n') {
        return Err(End::Failed("the primary closed the connection".into()));
    }
    while matches!(v.last(), Some(b'\n' | b'\r')) {
        v.pop();
    }
    Ok(String::from_utf8_lossy(&v).into_owned())
}

/// Sends a command and reads its one-line reply.
fn call(w: &mut TcpStream, r: &mut impl BufRead, args: &[&[u8]]) -> Result<String, End> {
    w.write_all(&encode(args))?;
    line(r)
}

/// One connection to the primary: handshake, full sync, stream.
fn session(state: &State, applier: &mut dyn Applier, host: &str, port: u16, generation: u64, synced: &mut bool) -> End {
    let end = match sync(state, applier, host, port, generation, synced) {
        Ok(()) => End::Stopped,
        Err(e) => e,
    };
    state.clear_master_link();
    end
}

fn sync(
    state: &State,
    applier: &mut dyn Applier,
    host: &str,
    port: u16,
    generation: u64,
    synced: &mut bool,
) -> Result<(), End> {
    let addr =
        (host, port).to_socket_addrs()?.next().ok_or_else(|| End::Failed(format!("{host} resolves to no address")))?;
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_nodelay(true)?;
    state.set_master_link(&stream);
    state.set_link(generation, Link::Handshake);
    // The primary pings an idle link every `repl-ping-replica-period`: a
    // link silent for `repl-timeout` (read when it connects) is dropped.
    stream.set_read_timeout(Some(state.settings.timeout()))?;
    let mut w = stream.try_clone()?;
    let mut r = BufReader::with_capacity(64 << 10, stream);
    let pong = call(&mut w, &mut r, &[b"PING"])?;
    // Redis goes on after these: AUTH follows.
    if pong.starts_with('-') && !pong.starts_with("-NOAUTH") && !pong.starts_with("-NOPERM") {
        return Err(End::Failed(format!("the primary answered PING with {pong}")));
    }
    let (user, pass) = state.auth();
    if let Some(pass) = pass {
        let reply = match &user {
            Some(u) => call(&mut w, &mut r, &[b"AUTH", u.as_bytes(), pass.as_bytes()])?,
            None => call(&mut w, &mut r, &[b"AUTH", pass.as_bytes()])?,
        };
        if reply.starts_with('-') {
            return Err(End::Failed(format!("AUTH refused by the primary: {reply}")));
        }
    }
    let me = state.port.to_string();
    // Errors of REPLCONF are not fatal (older primaries), as in Redis.
    call(&mut w, &mut r, &[b"REPLCONF", b"listening-port", me.as_bytes()])?;
    call(&mut w, &mut r, &[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])?;
    let (id, next) = state.psync_args();
    w.write_all(&encode(&[b"PSYNC", id.as_bytes(), next.to_string().as_bytes()]))?;
    // The primary may send newlines before it answers (a diskless sync's
    // delay).
    let reply = loop {
        let l = line(&mut r)?;
        if !l.is_empty() {
            break l;
        }
    };
    let mut words = reply.split(' ');
    match (words.next(), words.next(), words.next()) {
        (Some("+CONTINUE"), new_id, _) => {
            state.continue_sync(generation, new_id);
            eprintln!(
                "strata-server: replication from {host}:{port}: successful partial resynchronization (+CONTINUE) \
                 at offset {}",
                next - 1
            );
            *synced = true;
            return stream_from(state, applier, r, w, generation);
        }
        (Some("+FULLRESYNC"), Some(replid), Some(offset)) => {
            let offset: u64 = offset.parse().map_err(|_| End::Failed(format!("bad offset in {reply}")))?;
            state.start_sync(generation, replid, offset);
        }
        _ => return Err(End::Failed(format!("the primary answered PSYNC with {reply}"))),
    }
    state.touched();
    // The primary sends newlines while it prepares the image.
    let header = loop {
        let l = line(&mut r)?;
        if !l.is_empty() {
            break l;
        }
        state.touched();
    };
    super::load::load_image(state, applier, &mut r, &header, generation)?;
    state.sync_loaded(generation);
    *synced = true;
    stream_from(state, applier, r, w, generation)
}

/// Follows the stream once synced: what the reader holds already, then
/// the socket.
fn stream_from(
    state: &State,
    applier: &mut dyn Applier,
    r: BufReader<TcpStream>,
    w: TcpStream,
    generation: u64,
) -> Result<(), End> {
    let leftover = r.buffer().to_vec();
    let stream = r.into_inner();
    stream.set_read_timeout(Some(TICK))?;
    state.set_link(generation, Link::Connected);
    state.touched();
    follow(state, applier, stream, w, leftover, generation)
}

/// Sends `REPLCONF ACK <offset>`.
fn ack(w: &mut TcpStream, offset: u64) -> io::Result<()> {
    w.write_all(&encode(&[b"REPLCONF", b"ACK", offset.to_string().as_bytes()]))
}

/// Whether `args` is `REPLCONF GETACK ...`.
fn is_getack(args: &[Bytes]) -> bool {
    matches!(args, [a, b, ..] if a.eq_ignore_ascii_case(b"replconf") && b.eq_ignore_ascii_case(b"getack"))
}

/// Applies the command stream until the link fails or the thread must stop.
fn follow(
    state: &State,
    applier: &mut dyn Applier,
    mut stream: TcpStream,
    mut w: TcpStream,
    mut buf: Vec<u8>,
    generation: u64,
) -> Result<(), End> {
    state.read_offset.fetch_add(buf.len() as u64, Ordering::AcqRel);
    let mut chunk = vec![0u8; 64 << 10];
    let mut last_ack: Option<Instant> = None;
    let mut last_io = Instant::now();
    let mut errors = 0u32;
    // Bytes of `buf` applied but not yet counted and proxied: a
    // transaction counts once its EXEC is applied (Redis's `reploff`
    // stays before a MULTI until then), so a link cut inside one resumes
    // before its MULTI.
    let mut pending = 0usize;
    let mut in_multi = false;
    loop {
        if state.stale(generation) || applier.stopping() {
            return Err(End::Stopped);
        }
        let mut used = pending;
        // Applied and proxied as one: an image taken for a sub-replica
        // sees all of the batch or none of it.
        let applying = state.apply_lock.lock();
        let mut done = 0;
        // Commands parsed, applied as one batch before a GETACK is
        // answered and at the end of what was read.
        let mut batch: Vec<Vec<Bytes>> = Vec::new();
        let mut apply = |batch: &mut Vec<Vec<Bytes>>| {
            for (name, e) in applier.apply_batch(std::mem::take(batch)) {
                errors += 1;
                if errors <= LOGGED_ERRORS {
                    eprintln!("strata-server: replication: the primary's {name} failed here: {e}");
                }
            }
        };
        while let Parsed::Command(args, n) = parse(buf.get(used..).unwrap_or_default())? {
            if is_getack(&args) {
                apply(&mut batch);
                // Redis acknowledges the offset before the GETACK itself.
                ack(&mut w, state.offset() + done as u64)?;
            } else if !args.is_empty() {
                let name = args.first().map(|a| a.as_ref()).unwrap_or_default();
                if name.eq_ignore_ascii_case(b"multi") {
                    in_multi = true;
                } else if name.eq_ignore_ascii_case(b"exec") || name.eq_ignore_ascii_case(b"discard") {
                    in_multi = false;
                }
                batch.push(args);
            }
            used += n;
            if !in_multi {
                done = used;
            }
        }
        apply(&mut batch);
        if done > 0 {
            if let Some(s) = state.stream.get() {
                s.proxy(buf.get(..done).unwrap_or_default());
            }
            state.offset.fetch_add(done as u64, Ordering::AcqRel);
        }
        drop(applying);
        buf.drain(..done);
        pending = used - done;
        if last_ack.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
            ack(&mut w, state.offset())?;
            last_ack = Some(Instant::now());
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Err(End::Failed("the primary closed the connection".into())),
            Ok(n) => {
                buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
                state.read_offset.fetch_add(n as u64, Ordering::AcqRel);
                state.touched();
                last_io = Instant::now();
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                let limit = state.settings.timeout();
                if last_io.elapsed() > limit {
                    return Err(End::Failed(format!("no data from the primary for {} seconds", limit.as_secs())));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
}
