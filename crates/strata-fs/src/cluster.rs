//! Starts a cluster of `strata-fs-server` processes on loopback (tests,
//! benchmarks, `strata-fs cluster`): ephemeral ports, one data dir each,
//! killed when dropped.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::client::{Client, ClientOptions};
use crate::config::{ClusterConfig, ServerEntry};

/// A set of server processes described by one config file.
#[derive(Debug)]
pub struct LocalCluster {
    /// The config the servers were started with.
    pub config: ClusterConfig,
    /// Where the config file is.
    pub config_path: PathBuf,
    bin: PathBuf,
    /// Extra environment of every server process (e.g. fault injection).
    pub env: Vec<(String, String)>,
    children: Vec<Option<Child>>,
}

/// A free loopback port (bound, then released, so it may race; fine here).
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl LocalCluster {
    /// Writes a config for `n` servers under `dir` and starts them all.
    pub fn start(bin: &Path, dir: &Path, n: usize, sync: bool, small: bool) -> anyhow::Result<LocalCluster> {
        Self::start_with_env(bin, dir, n, sync, small, Vec::new())
    }

    /// Like [`LocalCluster::start`], with extra environment for the servers.
    pub fn start_with_env(
        bin: &Path,
        dir: &Path,
        n: usize,
        sync: bool,
        small: bool,
        env: Vec<(String, String)>,
    ) -> anyhow::Result<LocalCluster> {
        // Hold every port until all are chosen, so no two servers get one.
        let listeners: Vec<TcpListener> = (0..n).map(|_| TcpListener::bind("127.0.0.1:0")).collect::<Result<_, _>>()?;
        let mut servers = Vec::new();
        for (id, l) in listeners.iter().enumerate() {
            let addr = l.local_addr()?.to_string();
            servers.push(ServerEntry { id, addr, datadir: dir.join(format!("srv{id}")) });
        }
        drop(listeners);
        let config = ClusterConfig { servers, sync, small, inval_keep_secs: crate::config::DEFAULT_INVAL_KEEP_SECS };
        Self::launch(bin, dir, config, env)
    }

    /// Starts the servers of `config` (ports and data dirs already chosen),
    /// writing the config to `dir/cluster.conf`.
    pub fn launch(
        bin: &Path,
        dir: &Path,
        config: ClusterConfig,
        env: Vec<(String, String)>,
    ) -> anyhow::Result<LocalCluster> {
        let n = config.servers.len();
        let config_path = dir.join("cluster.conf");
        std::fs::write(&config_path, config.to_text())?;
        let children = (0..n).map(|_| None).collect();
        let mut c = LocalCluster { config, config_path, bin: bin.to_path_buf(), env, children };
        for id in 0..n {
            c.restart(id)?;
        }
        c.client(ClientOptions::default()).wait_ready(Duration::from_secs(30))?;
        Ok(c)
    }

    /// Starts (again) server `id`.
    pub fn restart(&mut self, id: usize) -> anyhow::Result<()> {
        self.kill(id);
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log_path(id))?;
        let child = Command::new(&self.bin)
            .arg("--config")
            .arg(&self.config_path)
            .arg("--id")
            .arg(id.to_string())
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()?;
        if let Some(slot) = self.children.get_mut(id) {
            *slot = Some(child);
        }
        Ok(())
    }

    /// Rewrites the config with another invalidation-list keep time and
    /// restarts every server with it.
    pub fn set_inval_keep_secs(&mut self, secs: u64) -> anyhow::Result<()> {
        self.config.inval_keep_secs = secs;
        std::fs::write(&self.config_path, self.config.to_text())?;
        for id in 0..self.children.len() {
            self.restart(id)?;
        }
        self.client(ClientOptions::default()).wait_ready(Duration::from_secs(30))?;
        Ok(())
    }

    /// Where server `id`'s stderr goes (appended across restarts).
    pub fn log_path(&self, id: usize) -> PathBuf {
        let dir = self.config_path.parent().map(Path::to_path_buf).unwrap_or_default();
        dir.join(format!("srv{id}.log"))
    }

    /// SIGKILLs server `id` (no-op if it is not running) and reaps it.
    pub fn kill(&mut self, id: usize) {
        if let Some(Some(mut c)) = self.children.get_mut(id).map(Option::take) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Process id of server `id`, if running.
    pub fn pid(&self, id: usize) -> Option<u32> {
        self.children.get(id).and_then(|c| c.as_ref()).map(Child::id)
    }

    /// Number of servers.
    pub fn len(&self) -> usize {
        self.children.len()
    }

    /// Whether the cluster has no servers.
    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// A new client of this cluster.
    pub fn client(&self, opts: ClientOptions) -> Client {
        Client::from_config(&self.config, opts)
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for id in 0..self.children.len() {
            self.kill(id);
        }
    }
}
