//! Replication, primary side: serving one replica after its `PSYNC` or
//! `SYNC`. The command handler decides between a partial resync (it
//! attaches the replica's spool at the offset asked for, atomically with
//! the backlog check) and a full one, and hands the connection over in a
//! [`Handover`]; [`serve`] then runs on a thread of its own, with a
//! blocking socket.
//!
//! A full sync takes the point-in-time views of every database with the
//! stream offset they match and attaches the replica's spool
//! ([`super::feed::Feed`]) at that offset, all under every key lock
//! (`State::snapshot`); the image goes out while the spool collects what
//! is written meanwhile, so the sync never starts over however fast the
//! writes come (up to `client-output-buffer-limit replica`'s hard limit).
//! The image is sent either diskless (`repl-diskless-sync yes`, the
//! default, to a replica that announced `capa eof`): after
//! `repl-diskless-sync-delay` seconds it is written straight to the
//! socket as `$EOF:<40 random chars>\r\n<rdb><the same 40 chars>`; or
//! disk-backed: written to a temporary file in the data directory
//! (Redis's `\n` keepalives going out meanwhile), then sent as
//! `$<len>\r\n<bytes>`. Every replica gets an image of its own (taken when
//! its delay ends), so replicas arriving within one delay do not share
//! one; the delay only ends early once `repl-diskless-sync-max-replicas`
//! replicas wait. Memory stays flat: images are streamed from engine
//! snapshots.
//!
//! After the image the thread sends the spool as it fills (PING when the
//! stream is idle), and a second thread reads the replica's `REPLCONF ACK
//! <offset>`. A replica whose spool overflows or that disconnects is
//! dropped (it reconnects and continues from the backlog if it can).
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

use super::feed::Feed;
use super::settings::BufferLimit;
use super::{unix_secs, State};
use crate::rdb::image::{write_image, ImageOptions};
use crate::rdb::write::{Header, ReplInfo};
use crate::store::SnapshotView;

/// How long the tail waits for new stream bytes before looking around.
const TICK: Duration = Duration::from_millis(100);
/// Keepalive newlines while the image is written.
const KEEPALIVE: Duration = Duration::from_secs(1);

/// The replication stream as the replication code reads and feeds it.
pub trait Stream: Send + Sync {
    /// The replication offset: bytes ever appended.
    fn offset(&self) -> u64;
    /// Attaches a replica's spool at `from` (filled with the backlog's
    /// bytes from there), if the backlog still holds `from..offset`;
    /// every later append goes to it too. `limit`: its output buffer
    /// limits (hard, soft, soft seconds; 0: none).
    fn attach(&self, from: u64, limit: BufferLimit) -> Option<Arc<Feed>>;
    /// Detaches a spool.
    fn detach(&self, feed: &Arc<Feed>);
    /// Appends a `PING` if nothing was appended for `idle`, so replicas
    /// see their link alive (the PING counts in the offset, as in Redis).
    /// Nothing while following a primary, whose PINGs are proxied.
    fn ping_if_idle(&self, idle: Duration);
    /// The backlog: (active, size, first byte's offset, bytes held).
    fn backlog(&self) -> (bool, u64, u64, u64);
    /// Appends `REPLCONF GETACK *`: replicas acknowledge at once (WAIT).
    fn getack(&self);
    /// Keeps a backlog of `size` bytes from now on.
    fn start(&self, size: u64);
    /// Drops the backlog and stops recording until the next `start`
    /// (`repl-backlog-ttl`); the offset stays.
    fn free(&self);
    /// Sets the backlog's size, keeping the newest bytes.
    fn resize(&self, size: u64);
    /// Sets the output buffer limits of every attached replica's spool.
    fn set_limit(&self, limit: BufferLimit);
    /// A full sync from a primary: the stream continues at `offset` with
    /// an empty backlog (and no spools).
    fn reset(&self, offset: u64);
    /// Whether the stream is a primary's, proxied: local writes are then
    /// not recorded.
    fn set_following(&self, on: bool);
    /// Appends bytes of the primary's stream as they came.
    fn proxy(&self, bytes: &[u8]);
}

/// What a full sync starts from, taken atomically (see `State::snapshot`):
/// the views of every database, the stream offset they match, the
/// replica's spool attached there, and the replication id.
pub struct Image {
    /// The views, one per database.
    pub views: Vec<Box<dyn SnapshotView>>,
    /// The stream offset of the views.
    pub offset: u64,
    /// The replica's spool, from `offset`.
    pub feed: Arc<Feed>,
    /// The replication id at that offset.
    pub replid: String,
}

/// Takes an [`Image`] with a spool of the given output buffer limits.
pub type Snapshotter = Arc<dyn Fn(BufferLimit) -> Result<Image, String> + Send + Sync>;

/// How the replica continues.
pub enum Resync {
    /// From the backlog: the reply line and the spool (already holding
    /// the bytes from the offset asked for).
    Partial {
        /// `+CONTINUE ...\r\n`.
        preamble: Vec<u8>,
        /// The spool.
        feed: Arc<Feed>,
    },
    /// An image first.
    Full {
        /// PSYNC (`+FULLRESYNC id offset` first), not SYNC.
        psync: bool,
        /// The replica announced `capa eof` (it takes a diskless image).
        eof: bool,
    },
}

/// What PSYNC/SYNC hands to the replica's thread.
pub struct Handover {
    /// Partial or full.
    pub resync: Resync,
    /// The stream.
    pub stream: Arc<dyn Stream>,
    /// Where a disk-backed image's temporary file goes.
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
    /// Its connection's address, `ip:port` (what CLIENT KILL names).
    pub addr: String,
    /// A handle of its connection, to cut it (CLIENT KILL).
    link: Option<TcpStream>,
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
    /// It must be disconnected (our replication id changed).
    pub(super) kicked: AtomicBool,
    /// It sent a `REPLCONF ACK` since it attached.
    acked: AtomicBool,
    /// CLIENT KILL cut it.
    killed: AtomicBool,
}

/// Serves a replica on a thread of its own: `sock` is the connection (in
/// blocking mode), `out` the replies owed before the handover, `input`
/// the bytes it sent after PSYNC, `ip` its address.
pub fn serve(state: Arc<State>, h: Handover, sock: TcpStream, out: Vec<u8>, input: Vec<u8>, ip: String) {
    let name = "strata-replica-out".to_string();
    let spawned = std::thread::Builder::new().name(name).spawn(move || {
        let me = Arc::new(Attached {
            addr: sock.peer_addr().map_or_else(|_| ip.clone(), |a| a.to_string()),
            link: sock.try_clone().ok(),
            ip,
            port: h.listening_port,
            online: AtomicBool::new(false),
            ack: AtomicU64::new(0),
            last_ack: AtomicU64::new(unix_secs()),
            gone: AtomicBool::new(false),
            kicked: AtomicBool::new(false),
            acked: AtomicBool::new(false),
            killed: AtomicBool::new(false),
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

impl Attached {
    /// Cuts the replica's connection (CLIENT KILL); its thread ends and the
    /// replica reconnects.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        if let Some(s) = &self.link {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// Detaches a spool from the stream when the replica's thread ends.
struct Attachment(Arc<dyn Stream>, Arc<Feed>);

impl Drop for Attachment {
    fn drop(&mut self) {
        self.0.detach(&self.1);
    }
}

/// Why the replica's thread must stop now, if it must.
fn must_stop(state: &State, me: &Attached) -> Option<io::Result<()>> {
    if me.gone.load(Ordering::Acquire) {
        return Some(Err(io::Error::new(io::ErrorKind::ConnectionAborted, "the replica closed the link")));
    }
    if me.kicked.load(Ordering::Acquire) {
        return Some(Err(io::Error::other("our replication id changed")));
    }
    if me.killed.load(Ordering::Acquire) {
        return Some(Err(io::Error::other("killed by CLIENT KILL")));
    }
    state.stopping().then_some(Ok(()))
}

/// The replica's whole life: reply, image, stream.
fn feed(
    state: &State,
    me: &Arc<Attached>,
    h: Handover,
    sock: &TcpStream,
    out: Vec<u8>,
    input: Vec<u8>,
) -> io::Result<()> {
    sock.set_nonblocking(false)?;
    // A write to the replica may stall `repl-timeout` (read when the
    // replica attaches).
    sock.set_write_timeout(Some(state.settings.timeout()))?;
    let mut w = sock;
    w.write_all(&out)?;
    let reader = sock.try_clone()?;
    let acks = me.clone();
    std::thread::Builder::new().name("strata-replica-in".into()).spawn(move || read_acks(reader, input, &acks))?;
    let spool = match h.resync {
        Resync::Partial { ref preamble, ref feed } => {
            w.write_all(preamble)?;
            feed.cut_on_overflow(sock.try_clone()?);
            Attachment(h.stream.clone(), feed.clone())
        }
        Resync::Full { psync, eof } => {
            let diskless = eof && state.settings.diskless();
            if diskless {
                if let Some(end) = diskless_delay(state, me, &mut w) {
                    return end;
                }
            }
            let image = state.snapshot(state.settings.replica_limit()).map_err(io::Error::other)?;
            image.feed.cut_on_overflow(sock.try_clone()?);
            let spool = Attachment(h.stream.clone(), image.feed.clone());
            if psync {
                w.write_all(format!("+FULLRESYNC {} {}\r\n", image.replid, image.offset).as_bytes())?;
            }
            let writing = Writing::start(state);
            if diskless {
                send_diskless(&mut w, &image, &h, &image_options(&state))?;
                drop(writing);
                // A Redis replica finds the EOF mark only at the end of
                // what it read: the stream waits for its first ACK, sent
                // once the image is loaded (Redis's
                // `repl_start_cmd_stream_on_ack`).
                let until = Instant::now() + state.settings.timeout();
                while !me.acked.load(Ordering::Acquire) {
                    if let Some(end) = must_stop(state, me) {
                        return end;
                    }
                    if Instant::now() > until {
                        return Err(io::Error::other("no REPLCONF ACK after the diskless image"));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            } else {
                send_image(&mut w, &image, &h, me, &image_options(&state))?;
                drop(writing);
            }
            spool
        }
    };
    me.online.store(true, Ordering::Release);
    loop {
        if let Some(end) = must_stop(state, me) {
            return end;
        }
        let chunks = spool.1.take(TICK).map_err(io::Error::other)?;
        drop(state.apply_lock.lock());
        if chunks.is_empty() {
            h.stream.ping_if_idle(state.settings.ping_period());
        }
        for c in chunks {
            w.write_all(&c)?;
        }
    }
}

/// Waits `repl-diskless-sync-delay` seconds (less once
/// `repl-diskless-sync-max-replicas` replicas wait), so that a replica's
/// peers arriving meanwhile start too; `Some` if the thread must stop.
/// The first waiter whose wait ends ends every wait begun before (a new
/// round): the replicas that were waiting start together, as Redis
/// starts one image for all of them.
fn diskless_delay(state: &State, me: &Attached, w: &mut &TcpStream) -> Option<io::Result<()>> {
    let until = Instant::now() + Duration::from_secs(state.settings.diskless_delay());
    let round = state.diskless_round.load(Ordering::Acquire);
    state.diskless_waiting.fetch_add(1, Ordering::AcqRel);
    // A newline a second keeps the replica's `repl-timeout` from firing
    // while it waits for the PSYNC reply (as Redis does in this state).
    let mut alive = Instant::now();
    let end = loop {
        if let Some(end) = must_stop(state, me) {
            break Some(end);
        }
        if state.diskless_round.load(Ordering::Acquire) != round {
            break None;
        }
        let max = state.settings.diskless_max_replicas();
        if Instant::now() >= until || (max > 0 && state.diskless_waiting.load(Ordering::Acquire) >= max) {
            state.diskless_round.fetch_add(1, Ordering::AcqRel);
            break None;
        }
        if alive.elapsed() >= KEEPALIVE {
            // A server frozen by DEBUG SLEEP (which holds the apply lock)
            // sends no newlines either, as Redis's would not.
            drop(state.apply_lock.lock());
            if let Err(e) = w.write_all(b"\n") {
                break Some(Err(e));
            }
            alive = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    state.diskless_waiting.fetch_sub(1, Ordering::AcqRel);
    end
}

/// The RDB header of an image.
fn header(image: &Image, h: &Handover) -> Header {
    Header {
        repl: Some(ReplInfo { stream_db: 0, id: image.replid.clone(), offset: image.offset as i64 }),
        ..Header::now(h.redis_ver, 0)
    }
}

/// An image being written, counted in `State::images` while it lives.
struct Writing<'a>(&'a State);

impl<'a> Writing<'a> {
    fn start(state: &'a State) -> Writing<'a> {
        state.images.fetch_add(1, Ordering::AcqRel);
        Writing(state)
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.0.images.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How images are written: as `rdb-key-save-delay` says.
fn image_options(state: &State) -> ImageOptions {
    ImageOptions { key_delay_us: state.settings.key_save_delay(), ..ImageOptions::default() }
}

/// Writes the image straight to the socket, framed by a random EOF mark.
fn send_diskless(w: &mut &TcpStream, image: &Image, h: &Handover, opts: &ImageOptions) -> io::Result<()> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mark: Vec<u8> = (0..40).map(|_| HEX[usize::from(rand::random::<u8>() & 15)]).collect();
    let mut out = BufWriter::with_capacity(1 << 16, *w);
    out.write_all(b"$EOF:")?;
    out.write_all(&mark)?;
    out.write_all(b"\r\n")?;
    let (mut out, _) =
        write_image(out, &header(image, h), &image.views, opts).map_err(|e| io::Error::other(e.to_string()))?;
    out.write_all(&mark)?;
    out.flush()
}

/// Writes the image to a temporary file (keepalives going out meanwhile),
/// then sends it as `$<len>\r\n<bytes>`.
fn send_image(w: &mut &TcpStream, image: &Image, h: &Handover, me: &Attached, opts: &ImageOptions) -> io::Result<()> {
    let path = h.dir.join(format!("temp-repl-{}-{}.rdb", std::process::id(), rand::random::<u32>()));
    let header = header(image, h);
    let done = AtomicBool::new(false);
    let result = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let r = File::create(&path).and_then(|f| {
                write_image(BufWriter::new(f), &header, &image.views, opts)
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
                            me.acked.store(true, Ordering::Release);
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
        f.debug_struct("Handover").field("full", &matches!(self.resync, Resync::Full { .. })).finish()
    }
}
