//! The network side: a small fixed number of event-loop threads, each
//! multiplexing many connections and running their commands inline
//! ([`event_loop`]); the acceptor (`server`) hands each new connection to
//! the least loaded loop.

mod conn;
mod event_loop;
mod tls;

use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::{Poll, Waker};

pub use conn::ClientGuard;

use crate::cmd::Shared;
use event_loop::{EventLoop, WAKER};

/// A new connection on its way to a loop.
pub struct Incoming {
    /// The accepted stream (non-blocking).
    pub stream: TcpStream,
    /// Peer address, for CLIENT LIST.
    pub addr: String,
    /// Keeps the connection counted until it closes.
    pub guard: ClientGuard,
    /// The TLS settings when it came in on the TLS port.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

struct Handle {
    tx: Sender<Incoming>,
    waker: Arc<Waker>,
    load: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

/// The running event loops.
pub struct Loops {
    handles: Vec<Handle>,
    next: usize,
}

impl Loops {
    /// Starts `n` (at least one) event-loop threads.
    pub fn start(shared: &Arc<Shared>, n: usize) -> std::io::Result<Loops> {
        let mut handles = Vec::new();
        for i in 0..n.max(1) {
            let poll = Poll::new()?;
            let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
            let (tx, rx) = channel();
            let load = Arc::new(AtomicUsize::new(0));
            let mail = crate::pubsub::LoopMail::new(waker.clone());
            let el = EventLoop::new(shared.clone(), poll, rx, load.clone(), mail);
            let thread = std::thread::Builder::new().name(format!("strata-loop-{i}")).spawn(move || el.run())?;
            handles.push(Handle { tx, waker, load, thread: Some(thread) });
        }
        Ok(Loops { handles, next: 0 })
    }

    /// Hands a connection to the least loaded loop (ties: round robin).
    pub fn assign(&mut self, inc: Incoming) {
        let n = self.handles.len();
        self.next = (self.next + 1) % n.max(1);
        let mut best = self.next;
        let mut best_load = usize::MAX;
        for k in 0..n {
            let i = (self.next + k) % n;
            let load = self.handles.get(i).map(|h| h.load.load(Ordering::Relaxed)).unwrap_or(usize::MAX);
            if load < best_load {
                best = i;
                best_load = load;
            }
        }
        if let Some(h) = self.handles.get(best) {
            // If the loop is gone the connection is dropped: closed and uncounted.
            if h.tx.send(inc).is_ok() {
                let _ = h.waker.wake();
            }
        }
    }

    /// After shutdown was requested: wakes every loop and waits (at most
    /// `limit`) until they have answered what they read and exited.
    pub fn stop(mut self, limit: Duration) {
        for h in &self.handles {
            let _ = h.waker.wake();
        }
        let deadline = Instant::now() + limit;
        for h in &mut self.handles {
            while h.thread.as_ref().is_some_and(|t| !t.is_finished()) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if let Some(t) = h.thread.take().filter(|t| t.is_finished()) {
                let _ = t.join();
            }
        }
    }
}
