//! Client side of the wire protocol: one connection per server, and
//! parallel rounds (send a frame to each server, then read every reply).

use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::error::{FsError, FsResult};
use crate::proto::{read_frame, write_frame, Frame, Request, Response};

/// Connections to every server of a cluster, opened lazily and reopened
/// after an error. Counts parallel rounds (round trips).
#[derive(Debug)]
pub struct Peers {
    addrs: Vec<String>,
    conns: Vec<Mutex<Option<TcpStream>>>,
    timeout: Duration,
    rounds: AtomicU64,
}

impl Peers {
    /// Connections (not yet opened) to `addrs`, with a reply timeout.
    pub fn new(addrs: Vec<String>, timeout: Duration) -> Peers {
        let conns = addrs.iter().map(|_| Mutex::new(None)).collect();
        Peers { addrs, conns, timeout, rounds: AtomicU64::new(0) }
    }

    /// Number of servers.
    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    /// Whether there are no servers.
    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }

    /// Parallel rounds sent so far (one per `call` or `round`).
    pub fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }

    fn connect(&self, server: usize) -> FsResult<TcpStream> {
        let addr = self.addrs.get(server).ok_or_else(|| FsError::Invalid(format!("no server {server}")))?;
        let s = TcpStream::connect(addr).map_err(|e| FsError::Transport(format!("{addr}: {e}")))?;
        s.set_nodelay(true).map_err(|e| FsError::Transport(e.to_string()))?;
        s.set_read_timeout(Some(self.timeout)).map_err(|e| FsError::Transport(e.to_string()))?;
        Ok(s)
    }

    /// One request to one server (one round trip).
    pub fn call(&self, server: usize, req: &Request) -> FsResult<Response> {
        let mut out = self.round(vec![(server, req.clone())]);
        out.pop().unwrap_or_else(|| Err(FsError::Transport("no reply".into())))
    }

    /// Sends every request before reading any reply: one parallel round
    /// trip. Requests for the same server travel as one [`Frame::Batch`].
    /// Replies come back in request order.
    pub fn round(&self, reqs: Vec<(usize, Request)>) -> Vec<FsResult<Response>> {
        self.rounds.fetch_add(1, Ordering::Relaxed);
        // Group per server, in server order (locks are taken in that order).
        let mut groups: std::collections::BTreeMap<usize, Vec<(usize, Request)>> = Default::default();
        let n = reqs.len();
        for (i, (server, req)) in reqs.into_iter().enumerate() {
            groups.entry(server).or_default().push((i, req));
        }
        let mut out: Vec<Option<FsResult<Response>>> = (0..n).map(|_| None).collect();
        let mut pending = Vec::new();
        for (server, items) in groups {
            let idx: Vec<usize> = items.iter().map(|(i, _)| *i).collect();
            let req = if items.len() == 1 {
                Frame::One(items.into_iter().map(|(_, r)| r).next().unwrap_or(Request::Ping))
            } else {
                Frame::Batch(items.into_iter().map(|(_, r)| r).collect())
            };
            let Some(slot) = self.conns.get(server) else {
                for i in idx {
                    out[i] = Some(Err(FsError::Invalid(format!("no server {server}"))));
                }
                continue;
            };
            let mut g = slot.lock();
            let r = (|| {
                if g.is_none() {
                    *g = Some(self.connect(server)?);
                }
                match g.as_mut() {
                    Some(s) => write_frame(s, &req),
                    None => Err(FsError::Transport("not connected".into())),
                }
            })();
            if r.is_err() {
                *g = None;
            }
            pending.push((idx, g, r));
        }
        for (idx, mut g, sent) in pending {
            let got = sent.and_then(|()| match g.as_mut() {
                Some(stream) => match read_frame::<Response>(stream) {
                    Ok(Some(resp)) => Ok(resp),
                    Ok(None) => Err(FsError::Transport("connection closed".into())),
                    Err(e) => Err(e),
                },
                None => Err(FsError::Transport("not connected".into())),
            });
            if got.is_err() {
                *g = None;
            }
            drop(g);
            match got {
                Ok(Response::Batch(rs)) if idx.len() > 1 && rs.len() == idx.len() => {
                    for (i, r) in idx.into_iter().zip(rs) {
                        out[i] = Some(Ok(r));
                    }
                }
                Ok(r) if idx.len() == 1 => out[idx[0]] = Some(Ok(r)),
                Ok(_) => {
                    for i in idx {
                        out[i] = Some(Err(FsError::Transport("batch reply does not match".into())));
                    }
                }
                Err(e) => {
                    for i in idx {
                        out[i] = Some(Err(e.clone()));
                    }
                }
            }
        }
        out.into_iter().map(|r| r.unwrap_or_else(|| Err(FsError::Transport("no reply".into())))).collect()
    }
}
