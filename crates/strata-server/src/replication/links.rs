//! The replication links as CLIENT KILL sees them: on a replica, the
//! connection to its primary (Redis's master client, whose address is the
//! primary's `ip:port`); on a primary, each replica's connection. Killing
//! one cuts the socket: a replica reconnects and continues with PSYNC, as
//! it does in Redis after `CLIENT KILL TYPE master`.

use std::net::{Shutdown, TcpStream};

use super::State;

/// Which side of a link a connection is, as CLIENT KILL's `TYPE` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    /// Our connection to the primary (`TYPE master`).
    Master,
    /// A replica's connection to us (`TYPE replica`, `TYPE slave`).
    Replica,
}

impl State {
    /// Notes the connection to the primary just made.
    pub(super) fn set_master_link(&self, stream: &TcpStream) {
        let addr = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        *self.master_link.lock() = stream.try_clone().ok().map(|s| (addr, s));
    }

    /// The connection to the primary ended.
    pub(super) fn clear_master_link(&self) {
        *self.master_link.lock() = None;
    }

    /// Cuts every replication link `matches` accepts (given its kind and
    /// address); returns how many.
    pub fn kill_links(&self, matches: &dyn Fn(LinkKind, &str) -> bool) -> usize {
        let mut killed = 0;
        if let Some((addr, s)) = self.master_link.lock().as_ref() {
            if matches(LinkKind::Master, addr) {
                let _ = s.shutdown(Shutdown::Both);
                killed += 1;
            }
        }
        for r in self.replicas.lock().iter() {
            if matches(LinkKind::Replica, &r.addr) {
                r.kill();
                killed += 1;
            }
        }
        killed
    }
}
