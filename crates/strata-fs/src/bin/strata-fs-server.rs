//! `strata-fs-server --config cluster.conf --id N`: one metadata server of
//! the InfiniFS-style namespace service (server 0 is the coordinator).

use std::path::PathBuf;

use clap::Parser;

/// One metadata server of the strata-fs namespace service.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Cluster config file (lines `id addr datadir`).
    #[arg(long, short)]
    config: PathBuf,
    /// This server's id in the config.
    #[arg(long)]
    id: usize,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let cfg = strata_fs::config::ClusterConfig::load(&args.config)?;
    let addr =
        cfg.servers.get(args.id).map(|s| s.addr.clone()).ok_or_else(|| anyhow::anyhow!("no server {}", args.id))?;
    let server = strata_fs::server::Server::open(&cfg, args.id)?;
    eprintln!("strata-fs-server {} listening on {addr}", args.id);
    server.serve(&addr)
}
