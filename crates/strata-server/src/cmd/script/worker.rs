//! The script thread: EVAL, EVALSHA, FCALL and their `_RO` forms sent by a
//! connection run here rather than on the connection's event loop, so
//! that the loop stays free to serve the other clients once a script runs
//! past `lua-time-limit` (`-BUSY`, `SCRIPT KILL`, `SHUTDOWN NOSAVE`).
//!
//! A connection that sends one is parked (like a client in a blocking
//! command); at the end of the pass its loop hands the pass's scripts over
//! together and waits for them as Redis's other clients wait for a
//! script: until they end or one passes `lua-time-limit`. Past the limit
//! the loop goes on serving; the script thread rings the connection's
//! mailbox when its reply is ready. Replies are sent in a later pass.
//! While a script is active every loop refrains from commands that would
//! wait for its locks (see [`Scripts::active`], `net::event_loop` and
//! `cmd::busy`).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};

use super::Scripts;
use crate::cmd::{cmdstats, commit, flag, notify, spec, CmdError, Ctx, Run, Session, Shared, Spec};
use crate::pubsub::Mailbox;
use crate::resp::Reply;

thread_local! {
    static ON_WORKER: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is the script thread (whose scripts the
/// server never stops by itself: the loops stay free for SCRIPT KILL).
pub(crate) fn on_worker() -> bool {
    ON_WORKER.with(Cell::get)
}

/// What lets the session of a network connection hand its scripts to the
/// script thread (which needs the server to outlive the call).
#[derive(Clone)]
pub struct ScriptHost(pub Arc<Shared>);

impl std::fmt::Debug for ScriptHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScriptHost")
    }
}

/// A script handed to the script thread: where its reply lands.
pub struct ScriptWait {
    slot: Mutex<Slot>,
    /// Set with the reply (read without the lock while spinning).
    finished: AtomicBool,
    ready: Condvar,
    /// The command's table index and when it was sent (commandstats).
    id: usize,
    started: Instant,
}

#[derive(Default)]
struct Slot {
    reply: Option<Reply>,
    /// Set once the connection stopped waiting: rung when the reply lands.
    parked: Option<Arc<Mailbox>>,
}

impl std::fmt::Debug for ScriptWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScriptWait(done: {})", self.done())
    }
}

impl ScriptWait {
    /// Whether the script has ended (its reply is waiting).
    pub fn done(&self) -> bool {
        self.slot.lock().reply.is_some()
    }

    fn finish(&self, reply: Reply) {
        let mut slot = self.slot.lock();
        slot.reply = Some(reply);
        self.finished.store(true, Ordering::Release);
        let ring = slot.parked.take();
        drop(slot);
        self.ready.notify_all();
        if let Some(mb) = ring {
            mb.ring();
        }
    }

    /// Waits until the script ends (true) or has run past the limit
    /// (false: the connection is parked, rung through `mailbox`).
    fn wait(&self, scripts: &Scripts, shared: &Shared, mailbox: Option<&Arc<Mailbox>>) -> bool {
        // Most scripts take microseconds: looking a moment saves the sleep
        // and wake-up that would cost more than the script.
        spin_until(|| self.finished.load(Ordering::Acquire));
        let mut slot = self.slot.lock();
        loop {
            if slot.reply.is_some() {
                return true;
            }
            let left = scripts.busy_in(lua_time_limit(shared));
            if left == Some(Duration::ZERO) {
                if let Some(mb) = mailbox {
                    // Under the slot's lock: the script thread either sees
                    // the mailbox and rings, or has not finished yet.
                    slot.parked = Some(mb.clone());
                    return false;
                }
            }
            // Not started yet (waiting for the locks or for the scripts
            // before it), before the limit, or nowhere to park: look again
            // when it may have changed.
            let nap = match left {
                Some(d) if !d.is_zero() => d.min(Duration::from_millis(50)),
                _ => Duration::from_millis(5),
            };
            self.ready.wait_for(&mut slot, nap);
        }
    }

    /// Parks the connection without waiting: rung through `mailbox` when
    /// the script ends, unless it has already.
    fn park(&self, mailbox: Option<&Arc<Mailbox>>) {
        let mut slot = self.slot.lock();
        if slot.reply.is_none() {
            slot.parked = mailbox.cloned();
        }
    }
}

/// A script command a connection sent, for the script thread: its event
/// loop hands the scripts of a pass over together (see [`run_all`]).
pub struct ScriptJob {
    shared: Arc<Shared>,
    db: usize,
    proto: u8,
    spec: &'static Spec,
    f: spec::DataFn,
    args: Vec<Bytes>,
    wait: Arc<ScriptWait>,
    /// Where to ring when the reply is ready (the connection's mailbox).
    mailbox: Option<Arc<Mailbox>>,
}

impl std::fmt::Debug for ScriptJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScriptJob({})", self.spec.name)
    }
}

/// `lua-time-limit` in ms.
pub fn lua_time_limit(shared: &Shared) -> u64 {
    u64::try_from(shared.tuning.int("lua-time-limit")).unwrap_or(0)
}

/// Parks a connection on a script command: the session's `script` has
/// its wait, and its `script_job` waits for the event loop to hand it to the
/// script thread at the end of the pass ([`run_all`]); the reply comes
/// through [`collect`].
pub(crate) fn offload(
    host: &ScriptHost,
    sess: &mut Session,
    id: usize,
    spec: &'static Spec,
    f: spec::DataFn,
    args: &[Bytes],
) -> Option<Reply> {
    let wait = Arc::new(ScriptWait {
        slot: Mutex::default(),
        finished: AtomicBool::new(false),
        ready: Condvar::new(),
        id,
        started: Instant::now(),
    });
    sess.script_job.push(ScriptJob {
        shared: host.0.clone(),
        db: sess.db,
        proto: sess.proto,
        spec,
        f,
        args: args.to_vec(),
        wait: wait.clone(),
        mailbox: sess.mailbox.clone(),
    });
    sess.script.push_back(wait);
    None
}

/// Parks the session on `args` too when it already waits for a script and
/// `args` is a script command that would be parked: pipelined scripts go
/// to the script thread in the same pass, their replies follow in order.
/// False (nothing done) for anything else, which waits for the replies.
pub(crate) fn park_next(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> bool {
    if sess.script.is_empty()
        || sess.blocked.is_some()
        || sess.multi.is_some()
        || shared.auth_required(sess.authed)
        || sess.subs.active()
    {
        return false;
    }
    let Some(host) = sess.script_host.clone() else { return false };
    let Ok((id, spec)) = crate::cmd::validate(args) else { return false };
    let Run::Data(f) = spec.run else { return false };
    // No script runs, so none refuses it with -BUSY (see `cmd::busy`).
    if !spec.has(flag::RUNS_SCRIPT) || shared.scripts.running() {
        return false;
    }
    shared.stats.total_commands.fetch_add(1, Ordering::Relaxed);
    offload(&host, sess, id, spec, f, args);
    true
}

/// Hands the scripts of a loop pass to the script thread, in order, and
/// waits for them as Redis's other clients wait for a script: until they
/// have ended or one runs past `lua-time-limit`. The connections of those
/// not ended then stay parked (rung when their reply is ready).
pub fn run_all(shared: &Shared, jobs: Vec<ScriptJob>) {
    let scripts = &shared.scripts;
    let mut waits = Vec::with_capacity(jobs.len());
    for job in jobs {
        waits.push((job.wait.clone(), job.mailbox.clone()));
        // Counted before the hand-over: from here on the loops hold back
        // the commands that would wait for the script's locks.
        scripts.queued.fetch_add(1, Ordering::AcqRel);
        if let Err(job) = scripts.send(job) {
            scripts.queued.fetch_sub(1, Ordering::AcqRel);
            job.wait.finish(Reply::err("ERR the script thread could not be started"));
        }
    }
    let mut waiting = true;
    for (wait, mailbox) in waits {
        if waiting {
            waiting = wait.wait(scripts, shared, mailbox.as_ref());
        } else {
            wait.park(mailbox.as_ref());
        }
    }
}

/// Whether the first of the session's parked scripts has ended.
pub fn script_done(sess: &Session) -> bool {
    sess.script.front().is_some_and(|w| w.done())
}

/// Appends the replies of the session's parked scripts that have ended,
/// in order up to the first still running, to `out` (counted in the
/// command and error stats; silenced by CLIENT REPLY like any reply) and
/// ends their waits; returns the number of replies appended.
pub fn collect(shared: &Shared, sess: &mut Session, out: &mut Vec<u8>) -> usize {
    let mut appended = 0;
    while let Some(wait) = sess.script.front().cloned() {
        let Some(reply) = wait.slot.lock().reply.take() else { break };
        sess.script.pop_front();
        shared.cmdstats.ran(wait.id, cmdstats::usec_since(wait.started), &reply);
        if let Reply::Error(e) = &reply {
            shared.stats.count_error(e);
        }
        let silenced = sess.reply_off || sess.reply_skip > 0;
        sess.reply_skip = sess.reply_skip.saturating_sub(1);
        if !silenced {
            reply.encode(sess.proto, out);
            appended += 1;
        }
    }
    appended
}

impl Scripts {
    /// Hands `job` to the script thread (started on first use); the job
    /// back if it cannot be started.
    fn send(&self, job: ScriptJob) -> Result<(), ScriptJob> {
        let mut worker = self.worker.lock();
        if worker.is_none() {
            let (tx, rx) = channel();
            let spawned = std::thread::Builder::new().name("strata-script".into()).spawn(move || serve(rx));
            if spawned.is_err() {
                return Err(job);
            }
            *worker = Some(tx);
        }
        match worker.as_ref() {
            Some(tx) => tx.send(job).map_err(|e| e.0),
            None => Err(job),
        }
    }

    /// Whether a script runs or waits to run: the loops must not start a
    /// command that could wait for its locks. Until the script passes
    /// `lua-time-limit` they hold their clients' commands back, past it
    /// those commands get `-BUSY` (see `cmd::busy`).
    pub fn active(&self) -> bool {
        self.queued.load(Ordering::Acquire) > 0 || self.running()
    }

    /// How long until the running script passes `limit_ms` (zero: it has);
    /// `None` if no script has started.
    fn busy_in(&self, limit_ms: u64) -> Option<Duration> {
        let since = self.running_since.load(Ordering::Acquire);
        if since == 0 {
            return None;
        }
        let ran = crate::keyspace::now_ms().saturating_sub(since);
        Some(Duration::from_millis((limit_ms + 1).saturating_sub(ran)))
    }

    /// At shutdown, after the loops stopped: stops a script still running
    /// (its writes are dropped, as `SHUTDOWN NOSAVE` drops Redis's) and
    /// waits up to `limit` for the script thread to be idle.
    pub fn stop_all(&self, limit: Duration) {
        self.abort.store(true, Ordering::Release);
        let deadline = Instant::now() + limit;
        while self.queued.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The script thread: runs the jobs one after another. It ends when the
/// server (holding the sending side) is dropped.
fn serve(rx: Receiver<ScriptJob>) {
    ON_WORKER.with(|w| w.set(true));
    while let Ok(job) = rx.recv() {
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_job(&job)));
        let reply = ran.unwrap_or_else(|_| Reply::err("ERR the script failed unexpectedly"));
        // After the locks are released (run_job returned): a loop that sees
        // no script active never waits for them.
        job.shared.scripts.queued.fetch_sub(1, Ordering::AcqRel);
        job.wait.finish(reply);
    }
}

/// How long a loop waiting for a script keeps looking (yielding the CPU,
/// which on a busy machine the script thread may need) before it sleeps.
const SPIN: Duration = Duration::from_micros(50);

/// Yields until `ready` holds or [`SPIN`] has passed.
fn spin_until(mut ready: impl FnMut() -> bool) {
    let until = Instant::now() + SPIN;
    while !ready() {
        if Instant::now() >= until {
            return;
        }
        std::thread::yield_now();
    }
}

/// Runs one script command under every key lock, as a data command runs,
/// and commits its writes as one batch (none if the server stopped it).
fn run_job(job: &ScriptJob) -> Reply {
    let shared = &*job.shared;
    if shared.scripts.abort.load(Ordering::Acquire) {
        return Reply::err("ERR the server is shutting down");
    }
    let _locks = shared.locks.lock_all();
    let mut ctx = Ctx::new(shared, job.db, job.proto, crate::keyspace::now_ms());
    let reply = notify::call(&mut ctx, job.spec, job.f, &job.args).unwrap_or_else(CmdError::into_reply);
    if shared.scripts.abort.load(Ordering::Acquire) {
        // Stopped at shutdown: nothing of it is applied.
        return reply;
    }
    commit(ctx, reply, &[])
}
