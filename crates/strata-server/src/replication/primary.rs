//! Replication, primary side: serving one replica after its `PSYNC` or
//! `SYNC`. The command handler takes the point-in-time views and the
//! stream offset they match (under every key lock) and hands the
//! connection over in a [`Handover`]; [`serve`] then runs on a thread of
//! its own, with a blocking socket: it writes the RDB image to a
//! temporary file in the data directory (sending Redis's `\n` keepalives
//! meanwhile), sends it as `$<len>\r\n<bytes>`, then tails the
//! replication stream from the image's offset, reading the replica's
//! `REPLCONF ACK <offset>` on a second thread. A replica that falls
//! behind the backlog or disconnects is dropped (it reconnects and syncs
//! again).
//!
//! This module knows nothing of command dispatch: the stream is reached
//! through the [`Stream`] trait, which the command layer implements.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::{unix_secs, State};
use crate::rdb::image::{write_image, ImageOptions};
use crate::rdb::write::{Header, ReplInfo};
use crate::store::SnapshotView;

/// How long a write to the replica may stall (Redis's `repl-timeout`).
const TIMEOUT: Duration = Duration::from_secs(60);
/// How long the tail waits for new stream bytes before looking around.
const TICK: Duration = Duration::from_millis(100);
/// Redis's `repl-ping-replica-period`.
const PING_PERIOD: Duration = Duration::from_secs(10);
/// Keepalive newlines while the image is written.
const KEEPALIVE: Duration = Duration::from_secs(1);

/// The replication stream as the primary side reads it.
pub trait Stream: Send + Sync {
    /// The replication offset: bytes ever appended.
    fn offset(&self) -> u64;
    /// The bytes from `from` to the current offset, if the backlog still
    /// holds them.
    fn since(&self, from: u64) -> Option<Vec<u8>>;
    /// Waits up to `timeout` for the offset to pass `from`.
    fn wait_past(&self, from: u64, timeout: Duration);
    /// Appends a `PING` if nothing was appended for `idle`, so replicas
    /// see their link alive (the PING counts in the offset, as in Redis).
    fn ping_if_idle(&self, idle: Duration);
    /// The backlog: (active, size, first byte's offset, bytes held).
    fn backlog(&self) -> (bool, u64, u64, u64);
    /// Appends `REPLCONF GETACK *`: replicas acknowledge at once (WAIT).
    fn getack(&self);
}

/// What PSYNC/SYNC hands to the replica's thread.
pub struct Handover {
    /// The replies to send first (`+FULLRESYNC id offset`, `+CONTINUE id`,
    /// nothing for SYNC).
    pub preamble: Vec<u8>,
    /// The views of every database for a full sync; `None`: a partial one.
    pub views: Option<Vec<Box<dyn SnapshotView>>>,
    /// The stream offset the replica continues from.
    pub offset: u64,
    /// The replication id the image carries.
    pub replid: String,
    /// The stream.
    pub stream: Arc<dyn Stream>,
    /// Where the image's temporary file goes.
    pub dir: PathBuf,
    /// The replica's `REPLCONF listening-port` (0: not told).
    pub listening_port: u16,
    /// The Redis version the image claims.
    pub redis_ver: &'static str,
}

/// One attached replica, as ROLE and INFO show it.
pub struct Attached {
    /// Its address (IP) as seen here.
    pub ip: String,
    /// Its listening port.
    pub port: u16,
    /// The image was sent; it follows the stream.
    pub online: AtomicBool,
    /// The last offset it acknowledged.
    pub ack: AtomicU64,
    /// Unix seconds of its last acknowledgement.
    pub last_ack: AtomicU64,
    /// Its connection ended.
    gone: AtomicBool,
}

/// Serves a replica on a thread of its own: `sock` is the connection (in
/// blocking mode), `out` the replies owed before the handover, `input`
/// the bytes it sent after PSYNC, `ip` its address.
pub fn serve(state: Arc<State>, h: Handover, sock: TcpStream, out: Vec<u8>, input: Vec<u8>, ip: String) {
    let name = "strata-replica-out".to_string();
    let spawned = std::thread::Builder::new().name(name).spawn(move || {
        let me = Arc::new(Attached {
            ip,
            port: h.listening_port,
            online: AtomicBool::new(false),
            ack: AtomicU64::new(0),
            last_ack: AtomicU64::new(unix_secs()),
            gone: AtomicBool::new(false),
        });
        state.attach(me.clone());
        if let Err(e) = feed(&state, &me, h, &sock, out, input) {
            eprintln!("strata-server: replica {}:{}: {e}; dropped", me.ip, me.port);
        }
        let _ = sock.shutdown(Shutdown::Both);
        state.detach(&me);
    });
    if let Err(e) = spawned {
        eprintln!("strata-server: starting a replica's thread: {e}");
    }
}

/// The replica's whole life: preamble, image, stream.
fn feed(
    state: &State,
    me: &Arc<Attached>,
    h: Handover,
    sock: &TcpStream,
    out: Vec<u8>,
    input: Vec<u8>,
) -> io::Result<()> {
    sock.set_nonblocking(false)?;
    sock.set_write_timeout(Some(TIMEOUT))?;
    let mut w = sock;
    w.write_all(&out)?;
    w.write_all(&h.preamble)?;
    let reader = sock.try_clone()?;
    let acks = me.clone();
    std::thread::Builder::new().name("strata-replica-in".into()).spawn(move || read_acks(reader, input, &acks))?;
    if let Some(views) = h.views.as_deref() {
        send_image(&mut w, views, &h, me)?;
    }
    me.online.store(true, Ordering::Release);
    let mut sent = h.offset;
    loop {
        if me.gone.load(Ordering::Acquire) {
            return Err(io::Error::new(io::ErrorKind::ConnectionAborted, "the replica closed the link"));
        }
        if state.stopping() {
            return Ok(());
        }
        match h.stream.since(sent) {
            None => return Err(io::Error::other("it fell behind the replication backlog")),
            Some(b) if b.is_empty() => {
                h.stream.ping_if_idle(PING_PERIOD);
                h.stream.wait_past(sent, TICK);
            }
            Some(b) => {
                w.write_all(&b)?;
                sent += b.len() as u64;
            }
        }
    }
}

/// Writes the image to a temporary file (keepalives going out meanwhile),
/// then sends it as `$<len>\r\n<bytes>`.
fn send_image(w: &mut &TcpStream, views: &[Box<dyn SnapshotView>], h: &Handover, me: &Attached) -> io::Result<()> {
    let path = h.dir.join(format!("temp-repl-{}-{}.rdb", std::process::id(), rand::random::<u32>()));
    let header = Header {
        repl: Some(ReplInfo { stream_db: 0, id: h.replid.clone(), offset: h.offset as i64 }),
        ..Header::now(h.redis_ver, 0)
    };
    let done = AtomicBool::new(false);
    let result = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let r = File::create(&path).and_then(|f| {
                write_image(BufWriter::new(f), &header, views, &ImageOptions::default())
                    .map_err(|e| io::Error::other(e.to_string()))
                    .and_then(|(b, _)| b.into_inner().map_err(|e| e.into_error()))
                    .and_then(|f| f.sync_all())
            });
            done.store(true, Ordering::Release);
            r
        });
        let mut last = Instant::now();
        while !done.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(10));
            if last.elapsed() >= KEEPALIVE && !me.gone.load(Ordering::Acquire) {
                // A replica waiting for the image takes newlines as keepalives.
                let _ = w.write_all(b"\n");
                last = Instant::now();
            }
        }
        writer.join().unwrap_or_else(|_| Err(io::Error::other("the image writer panicked")))
    });
    let sent = result.and_then(|()| {
        let f = File::open(&path)?;
        let len = f.metadata()?.len();
        w.write_all(format!("${len}\r\n").as_bytes())?;
        let copied = io::copy(&mut BufReader::with_capacity(1 << 20, f), w)?;
        if copied != len {
            return Err(io::Error::other("the image file changed while sent"));
        }
        Ok(())
    });
    let _ = std::fs::remove_file(&path);
    sent
}

/// Reads what the replica sends: `REPLCONF ACK <offset>` records its
/// offset; anything else is ignored. Marks the replica gone at the end.
fn read_acks(mut r: TcpStream, input: Vec<u8>, me: &Attached) {
    let mut buf = BytesMut::from(&input[..]);
    let mut chunk = [0u8; 4096];
    let limits = crate::resp::Limits::default();
    'read: loop {
        loop {
            match crate::resp::parse_request(&mut buf, &limits) {
                Ok(Some(args)) => {
                    let word = |i: usize| args.get(i).map(|a| a.as_ref()).unwrap_or_default();
                    if word(0).eq_ignore_ascii_case(b"replconf") && word(1).eq_ignore_ascii_case(b"ack") {
                        if let Some(off) = crate::numbers::parse_i64(word(2)).and_then(|o| u64::try_from(o).ok()) {
                            me.ack.fetch_max(off, Ordering::AcqRel);
                            me.last_ack.store(unix_secs(), Ordering::Release);
                        }
                    }
                }
                Ok(None) => break,
                Err(_) => break 'read,
            }
        }
        match r.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
        }
    }
    me.gone.store(true, Ordering::Release);
    let _ = r.shutdown(Shutdown::Both);
}

impl std::fmt::Debug for Handover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handover").field("offset", &self.offset).field("full", &self.views.is_some()).finish()
    }
}
