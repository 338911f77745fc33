//! One replica's spool of the replication stream: every byte appended to
//! the stream from the replica's starting offset is queued here (as shared
//! chunks, not copied per replica) until the replica's thread sends it.
//! A full sync's spool starts at the image's offset, so the sync completes
//! however much is written meanwhile, as long as the spool stays within
//! `client-output-buffer-limit replica` (Redis's `256mb 64mb 60`): past the
//! hard limit, or over the soft limit for longer than its seconds, the
//! replica is dropped, as Redis drops it.

use std::collections::VecDeque;
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};

use super::settings::BufferLimit;

/// A replica's queue of stream bytes not yet sent.
pub struct Feed {
    inner: Mutex<Queue>,
    grew: Condvar,
    /// Hard bytes, soft bytes, soft seconds (0: none); CONFIG SET changes
    /// them for attached replicas too.
    limit: Mutex<BufferLimit>,
    /// The replica's connection, shut down on overflow: its thread may be
    /// blocked writing to a replica that does not read.
    link: Mutex<Option<TcpStream>>,
}

#[derive(Default)]
struct Queue {
    chunks: VecDeque<Bytes>,
    /// Bytes queued.
    held: u64,
    /// Since when the spool holds at least the soft limit.
    soft_since: Option<Instant>,
    /// Which limit was passed: the replica must be dropped.
    overflow: Option<&'static str>,
}

impl Feed {
    /// An empty spool with the output buffer limits `limit`.
    pub fn new(limit: BufferLimit) -> Feed {
        Feed {
            inner: Mutex::new(Queue::default()),
            grew: Condvar::new(),
            limit: Mutex::new(limit),
            link: Mutex::new(None),
        }
    }

    /// Changes the limits (CONFIG SET client-output-buffer-limit).
    pub fn set_limit(&self, limit: BufferLimit) {
        *self.limit.lock() = limit;
    }

    /// The connection to cut when the spool overflows.
    pub fn cut_on_overflow(&self, link: TcpStream) {
        *self.link.lock() = Some(link);
    }

    /// Why the replica is dropped, once a limit was passed.
    fn reason(&self, which: &str) -> String {
        let (hard, soft, secs) = *self.limit.lock();
        match which {
            "hard" => format!("its spool passed client-output-buffer-limit's hard limit ({hard} bytes)"),
            _ => format!(
                "its spool stayed over client-output-buffer-limit's soft limit ({soft} bytes) for more than {secs} \
                 seconds"
            ),
        }
    }

    /// Queues a chunk of the stream.
    pub fn push(&self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        let mut q = self.inner.lock();
        if q.overflow.is_some() {
            return;
        }
        q.held += chunk.len() as u64;
        q.chunks.push_back(chunk);
        let (hard, soft, secs) = *self.limit.lock();
        let mut over = None;
        if hard > 0 && q.held > hard {
            over = Some("hard");
        } else if soft > 0 && q.held >= soft {
            // As Redis: over the soft limit at two checks more than
            // `secs` whole seconds apart.
            let since = *q.soft_since.get_or_insert_with(Instant::now);
            if since.elapsed().as_secs() > secs {
                over = Some("soft");
            }
        } else {
            q.soft_since = None;
        }
        if let Some(which) = over {
            // Nothing more is kept: the thread sees the overflow (or its
            // write fails on the cut connection) and drops the replica,
            // which syncs again.
            q.overflow = over;
            q.chunks.clear();
            q.held = 0;
            if let Some(link) = self.link.lock().take() {
                eprintln!(
                    "strata-server: replica {}: {}; dropped",
                    link.peer_addr().map(|a| a.to_string()).unwrap_or_default(),
                    self.reason(which)
                );
                let _ = link.shutdown(Shutdown::Both);
            }
        }
        self.grew.notify_all();
    }

    /// Takes what is queued, waiting up to `timeout` for something; `Err`
    /// once the spool overflowed.
    pub fn take(&self, timeout: Duration) -> Result<Vec<Bytes>, String> {
        let mut q = self.inner.lock();
        if q.chunks.is_empty() && q.overflow.is_none() {
            let _ = self.grew.wait_for(&mut q, timeout);
        }
        if let Some(which) = q.overflow {
            return Err(self.reason(which));
        }
        q.held = 0;
        Ok(q.chunks.drain(..).collect())
    }

    /// Bytes queued, not yet sent.
    pub fn held(&self) -> u64 {
        self.inner.lock().held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_in_order_and_overflows_at_the_hard_limit() {
        let f = Feed::new((10, 0, 0));
        f.push(Bytes::from_static(b"abc"));
        f.push(Bytes::from_static(b"defg"));
        assert_eq!(f.held(), 7);
        let got: Vec<u8> = f.take(Duration::ZERO).unwrap().concat();
        assert_eq!(got, b"abcdefg");
        assert!(f.take(Duration::from_millis(1)).unwrap().is_empty());
        f.push(Bytes::from_static(b"0123456789x"));
        assert!(f.take(Duration::ZERO).is_err());
        let unlimited = Feed::new((0, 0, 0));
        unlimited.push(Bytes::from(vec![0u8; 1 << 16]));
        assert_eq!(unlimited.take(Duration::ZERO).unwrap().concat().len(), 1 << 16);
    }

    #[test]
    fn overflows_when_over_the_soft_limit_for_longer_than_its_seconds() {
        let f = Feed::new((0, 5, 0));
        f.push(Bytes::from_static(b"0123456"));
        // Reached once: not yet.
        assert_eq!(f.take(Duration::ZERO).unwrap().concat().len(), 7);
        std::thread::sleep(Duration::from_millis(1100));
        // Below it again in between: the clock starts over.
        f.push(Bytes::from_static(b"abc"));
        f.push(Bytes::from_static(b"de"));
        assert_eq!(f.held(), 5, "not dropped: over the soft limit only now");
        std::thread::sleep(Duration::from_millis(1100));
        f.push(Bytes::from_static(b"g"));
        assert!(f.take(Duration::ZERO).unwrap_err().contains("soft limit"));
        let patient = Feed::new((0, 5, 3600));
        patient.push(Bytes::from_static(b"0123456"));
        patient.push(Bytes::from_static(b"0123456"));
        assert!(patient.take(Duration::ZERO).is_ok());
    }
}
