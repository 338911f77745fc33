//! One replica's spool of the replication stream: every byte appended to
//! the stream from the replica's starting offset is queued here (as shared
//! chunks, not copied per replica) until the replica's thread sends it.
//! A full sync's spool starts at the image's offset, so the sync completes
//! however much is written meanwhile, as long as the spool stays under
//! `client-output-buffer-limit replica`'s hard limit (Redis's 256mb); past
//! it the replica is dropped, as Redis drops it.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};

/// A replica's queue of stream bytes not yet sent.
pub struct Feed {
    inner: Mutex<Queue>,
    grew: Condvar,
    /// The hard limit in bytes (0: none).
    hard: u64,
}

#[derive(Default)]
struct Queue {
    chunks: VecDeque<Bytes>,
    /// Bytes queued.
    held: u64,
    /// Set once the limit was passed: the replica must be dropped.
    overflow: bool,
}

impl Feed {
    /// An empty spool with the hard limit `hard` bytes (0: none).
    pub fn new(hard: u64) -> Feed {
        Feed { inner: Mutex::new(Queue::default()), grew: Condvar::new(), hard }
    }

    /// Queues a chunk of the stream.
    pub fn push(&self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        let mut q = self.inner.lock();
        if q.overflow {
            return;
        }
        q.held += chunk.len() as u64;
        q.chunks.push_back(chunk);
        if self.hard > 0 && q.held > self.hard {
            // Nothing more is kept: the thread sees the overflow and drops
            // the replica, which syncs again.
            q.overflow = true;
            q.chunks.clear();
            q.held = 0;
        }
        self.grew.notify_all();
    }

    /// Takes what is queued, waiting up to `timeout` for something; `Err`
    /// once the spool overflowed.
    pub fn take(&self, timeout: Duration) -> Result<Vec<Bytes>, String> {
        let mut q = self.inner.lock();
        if q.chunks.is_empty() && !q.overflow {
            let _ = self.grew.wait_for(&mut q, timeout);
        }
        if q.overflow {
            return Err(format!("its spool passed client-output-buffer-limit's hard limit ({} bytes)", self.hard));
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
        let f = Feed::new(10);
        f.push(Bytes::from_static(b"abc"));
        f.push(Bytes::from_static(b"defg"));
        assert_eq!(f.held(), 7);
        let got: Vec<u8> = f.take(Duration::ZERO).unwrap().concat();
        assert_eq!(got, b"abcdefg");
        assert!(f.take(Duration::from_millis(1)).unwrap().is_empty());
        f.push(Bytes::from_static(b"0123456789x"));
        assert!(f.take(Duration::ZERO).is_err());
        let unlimited = Feed::new(0);
        unlimited.push(Bytes::from(vec![0u8; 1 << 16]));
        assert_eq!(unlimited.take(Duration::ZERO).unwrap().concat().len(), 1 << 16);
    }
}
