//! The cluster config file: one line `id addr datadir` per server.
//!
//! ```text
//! # id  addr            datadir
//! 0     127.0.0.1:7400  /srv/fs0
//! 1     127.0.0.1:7401  /srv/fs1
//! sync  on          # durable (msync) writes; `off`: survive a process crash only
//! small on          # small engine sizes (tests)
//! inval_keep_secs 600  # drop invalidation entries older than this; must
//!                      # exceed every client's cache TTL (default 60 s)
//! ```
//! Server 0 is the rename/transaction coordinator. Ids must be 0..n-1.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// One metadata server of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerEntry {
    /// Index of the server (0 is the coordinator).
    pub id: usize,
    /// Address it listens on, e.g. `127.0.0.1:7400`.
    pub addr: String,
    /// Its engine's data directory.
    pub datadir: PathBuf,
}

/// The parsed cluster config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// Servers, indexed by id.
    pub servers: Vec<ServerEntry>,
    /// Whether writes are made durable against power loss (msync) before a reply.
    pub sync: bool,
    /// Whether engines use small test sizes (64 MiB PM region).
    pub small: bool,
    /// Seconds an invalidation entry is kept (longer than any client's cache TTL).
    pub inval_keep_secs: u64,
}

/// Default of [`ClusterConfig::inval_keep_secs`].
pub const DEFAULT_INVAL_KEEP_SECS: u64 = 600;

impl ClusterConfig {
    /// Parses the text of a config file.
    pub fn parse(text: &str) -> anyhow::Result<ClusterConfig> {
        let mut servers = Vec::new();
        let (mut sync, mut small, mut inval_keep_secs) = (true, false, DEFAULT_INVAL_KEEP_SECS);
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            match f.as_slice() {
                ["sync", v] => sync = on_off(v, i)?,
                ["small", v] => small = on_off(v, i)?,
                ["inval_keep_secs", v] => {
                    inval_keep_secs = v.parse().with_context(|| format!("line {}: bad inval_keep_secs", i + 1))?
                }
                [id, addr, dir] => {
                    let id: usize = id.parse().with_context(|| format!("line {}: bad server id", i + 1))?;
                    servers.push(ServerEntry { id, addr: addr.to_string(), datadir: PathBuf::from(dir) });
                }
                _ => bail!("line {}: expected `id addr datadir`, `sync on|off` or `small on|off`", i + 1),
            }
        }
        servers.sort_by_key(|s| s.id);
        for (i, s) in servers.iter().enumerate() {
            if s.id != i {
                bail!("server ids must be 0..n-1 without gaps (missing {i})");
            }
        }
        if servers.is_empty() {
            bail!("no servers in config");
        }
        Ok(ClusterConfig { servers, sync, small, inval_keep_secs })
    }

    /// Reads and parses a config file.
    pub fn load(path: &Path) -> anyhow::Result<ClusterConfig> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text)
    }

    /// The config as file text (what `parse` reads back).
    pub fn to_text(&self) -> String {
        let mut s = String::from("# id addr datadir\n");
        for e in &self.servers {
            s.push_str(&format!("{} {} {}\n", e.id, e.addr, e.datadir.display()));
        }
        s.push_str(&format!("sync {}\nsmall {}\n", onoff(self.sync), onoff(self.small)));
        s.push_str(&format!("inval_keep_secs {}\n", self.inval_keep_secs));
        s
    }

    /// Addresses by server id.
    pub fn addrs(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.addr.clone()).collect()
    }
}

fn onoff(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

fn on_off(v: &str, line: usize) -> anyhow::Result<bool> {
    match v {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => bail!("line {}: expected on or off", line + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_round_trips() {
        let c = ClusterConfig::parse("1 127.0.0.1:2 /b\n# x\n0 127.0.0.1:1 /a\nsync off\n").unwrap();
        assert_eq!(c.servers.len(), 2);
        assert_eq!(c.servers[0].addr, "127.0.0.1:1");
        assert!(!c.sync);
        assert_eq!(ClusterConfig::parse(&c.to_text()).unwrap(), c);
        assert!(ClusterConfig::parse("1 a b\n").is_err());
        assert!(ClusterConfig::parse("").is_err());
    }
}
