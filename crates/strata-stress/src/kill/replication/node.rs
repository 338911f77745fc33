//! One strata-server of a replication round: its data directory (kept
//! across restarts), the port of its current process, starting with
//! retries, SIGKILL, and reading `INFO` fields.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use super::super::server::{free_port, spawn_server, wait_ready};
use crate::resp_client::{Client, Reply};

/// Start attempts, each on a new port (another process may take a port
/// between our probe and the server's bind).
const START_ATTEMPTS: usize = 3;

/// A server's data directory and its running process, if any.
pub struct Node {
    /// `n0`, `n1`, ... (for messages).
    pub name: String,
    bin: PathBuf,
    dir: PathBuf,
    /// Port of the current (or last) process.
    pub port: u16,
    child: Option<Child>,
    /// Full syncs this node serves as a primary: diskless (`$EOF:`) or
    /// from a file.
    diskless: bool,
}

impl Node {
    /// A node with data in `dir` (created), not started.
    pub fn new(bin: &Path, dir: PathBuf, name: String, diskless: bool) -> anyhow::Result<Node> {
        std::fs::create_dir_all(&dir)?;
        Ok(Node { name, bin: bin.to_path_buf(), dir, port: 0, child: None, diskless })
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Starts the server (`--durability sync`, a small PM region), following
    /// `primary` from the start if given. `Err` inside: it did not answer
    /// PING after every attempt.
    pub fn start(&mut self, primary: Option<u16>) -> anyhow::Result<Result<(), String>> {
        self.kill();
        let follow = primary.map(|p| format!("127.0.0.1 {p}"));
        let mut extra = vec!["--durability", "sync", "--pm-size", "64mb"];
        if let Some(f) = &follow {
            extra.extend(["--replicaof", f.as_str()]);
        }
        for _ in 0..START_ATTEMPTS {
            let port = free_port()?;
            let mut child = spawn_server(&self.bin, &self.dir, port, &extra)?;
            if wait_ready(&mut child, port)? {
                self.port = port;
                self.child = Some(child);
                self.configure()?;
                return Ok(Ok(()));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        Ok(Err(format!("{} did not start ({START_ATTEMPTS} attempts): {}", self.name, self.log_tail())))
    }

    /// Sets how the node serves full syncs, with no delay (Redis's default
    /// `repl-diskless-sync-delay 5` would wait 5 s for more replicas at
    /// every sync). A server without these settings refuses them; it syncs
    /// its own way.
    fn configure(&self) -> anyhow::Result<()> {
        let mode: &[u8] = if self.diskless { b"yes" } else { b"no" };
        let _ = self.call(&[b"CONFIG", b"SET", b"repl-diskless-sync", mode, b"repl-diskless-sync-delay", b"0"])?;
        Ok(())
    }

    /// SIGKILL (no chance to flush or say goodbye to replicas).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Whether the process has exited on its own.
    pub fn exited(&mut self) -> bool {
        match self.child.as_mut().map(|c| c.try_wait()) {
            Some(Ok(Some(_))) | None => true,
            Some(Ok(None)) => false,
            Some(Err(_)) => true,
        }
    }

    /// A new connection.
    pub fn client(&self) -> anyhow::Result<Client> {
        Client::connect(&self.addr())
    }

    /// One command on a new connection.
    pub fn call(&self, args: &[&[u8]]) -> anyhow::Result<Reply> {
        self.client()?.call(args)
    }

    /// `INFO section` as name to value.
    pub fn info(&self, section: &str) -> anyhow::Result<BTreeMap<String, String>> {
        let r = self.call(&[b"INFO", section.as_bytes()])?;
        let Reply::Bulk(Some(text)) = r else { anyhow::bail!("{}: INFO {section} answered {r:?}", self.name) };
        Ok(String::from_utf8_lossy(&text)
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect())
    }

    /// `REPLICAOF 127.0.0.1 port`, or `REPLICAOF NO ONE` for `None`.
    pub fn replicaof(&self, primary: Option<u16>) -> anyhow::Result<Result<(), String>> {
        let port = primary.map(|p| p.to_string());
        let r = match &port {
            Some(p) => self.call(&[b"REPLICAOF", b"127.0.0.1", p.as_bytes()])?,
            None => self.call(&[b"REPLICAOF", b"NO", b"ONE"])?,
        };
        match r {
            Reply::Simple(_) => Ok(Ok(())),
            other => Ok(Err(format!("{}: REPLICAOF {port:?} answered {other:?}", self.name))),
        }
    }

    /// Waits until `INFO replication` says `master_link_status:up` (and the
    /// sync is over). `Err` inside after `timeout`.
    pub fn wait_link_up(&mut self, timeout: Duration) -> anyhow::Result<Result<(), String>> {
        let start = Instant::now();
        let mut last = String::new();
        while start.elapsed() < timeout {
            if self.exited() {
                return Ok(Err(format!("{} exited while syncing: {}", self.name, self.log_tail())));
            }
            match self.info("replication") {
                Ok(i) => {
                    let up = i.get("master_link_status").is_some_and(|s| s == "up");
                    let syncing = i.get("master_sync_in_progress").is_some_and(|s| s != "0");
                    if up && !syncing {
                        return Ok(Ok(()));
                    }
                    last = format!("{:?}", i.get("master_link_status"));
                }
                Err(e) => last = format!("{e:#}"),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Err(format!(
            "{} never reached master_link_status:up in {:?} (last {last}): {}",
            self.name,
            timeout,
            self.log_tail()
        )))
    }

    /// The last lines of the server's log (all its processes').
    pub fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(self.dir.with_extension("log")).unwrap_or_default();
        let lines: Vec<&str> = s.lines().rev().take(4).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// An integer field of an INFO map.
pub fn field(i: &BTreeMap<String, String>, name: &str) -> Option<i64> {
    i.get(name).and_then(|v| v.parse().ok())
}
