//! `strata-fs bench`: an mdtest-style metadata benchmark (tree of depth D
//! and fan-out B per thread, phases create/stat/readdir/rename/remove for
//! files and directories, T client threads), the Pangu operation mix, and
//! a cold path-lookup test by depth (speculation on and off). Prints
//! ops/s, round trips per op, and CPU time per op of the client process
//! and of the servers (from /proc/PID/stat; getrusage would need unsafe FFI).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::client::{Client, ClientOptions};
use crate::cluster::LocalCluster;
use crate::config::ClusterConfig;
use crate::cpu::cpu_seconds;
use crate::error::FsResult;

/// Options of `strata-fs bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Start a local cluster of this many servers (ignored with --config).
    #[arg(long, default_value_t = 1)]
    pub servers: usize,
    /// Durable (msync) writes on the local cluster's servers.
    #[arg(long)]
    pub sync: bool,
    /// What to run: mdtest, pangu, lookup, all, or fuse (POSIX phases on a
    /// FUSE mount and on a local directory).
    #[arg(long, default_value = "all")]
    pub mode: String,
    /// Tree depth per thread (mdtest -z).
    #[arg(long, default_value_t = 2)]
    pub depth: usize,
    /// Fan-out (mdtest -b).
    #[arg(long, default_value_t = 4)]
    pub fanout: usize,
    /// Files per directory (mdtest -I).
    #[arg(long, default_value_t = 20)]
    pub items: usize,
    /// Client threads (each its own client and tree, mdtest -u).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Client access cache: on or off.
    #[arg(long, default_value = "on")]
    pub cache: String,
    /// Speculative path resolution: on or off.
    #[arg(long, default_value = "on")]
    pub speculate: String,
    /// Operations per thread of the Pangu mix.
    #[arg(long, default_value_t = 5000)]
    pub pangu_ops: usize,
    /// Path depths of the lookup test (comma-separated).
    #[arg(long, default_value = "1,2,4,8,10,16")]
    pub lookup_depths: String,
    /// Cold lookups per depth.
    #[arg(long, default_value_t = 300)]
    pub lookups: usize,
    /// Print result rows as a markdown table.
    #[arg(long)]
    pub markdown: bool,
    /// A label for the rows (e.g. the sweep point).
    #[arg(long, default_value = "")]
    pub label: String,
}

struct Meter {
    t0: Instant,
    client_cpu: f64,
    server_cpu: f64,
    rounds: u64,
}

struct Ctx {
    cfg: ClusterConfig,
    server_pids: Vec<String>,
    opts: ClientOptions,
    args: BenchArgs,
}

impl Ctx {
    fn server_cpu(&self) -> f64 {
        self.server_pids.iter().filter_map(|p| cpu_seconds(p)).sum()
    }

    fn start(&self, clients: &[Arc<Client>]) -> Meter {
        Meter {
            t0: Instant::now(),
            client_cpu: cpu_seconds("self").unwrap_or(0.0),
            server_cpu: self.server_cpu(),
            rounds: clients.iter().map(|c| c.rounds()).sum(),
        }
    }

    fn report(&self, m: Meter, clients: &[Arc<Client>], phase: &str, ops: usize) {
        let secs = m.t0.elapsed().as_secs_f64().max(1e-9);
        let rounds: u64 = clients.iter().map(|c| c.rounds()).sum::<u64>() - m.rounds;
        let ccpu = cpu_seconds("self").unwrap_or(0.0) - m.client_cpu;
        let scpu = self.server_cpu() - m.server_cpu;
        let ops_f = ops.max(1) as f64;
        let a = &self.args;
        let line = format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.2} | {:.1} | {} |",
            a.label,
            self.cfg.servers.len(),
            a.threads,
            a.cache,
            a.speculate,
            phase,
            ops,
            ops_f / secs,
            rounds as f64 / ops_f,
            ccpu * 1e6 / ops_f,
            if self.server_pids.is_empty() { "n/a".to_string() } else { format!("{:.1}", scpu * 1e6 / ops_f) },
        );
        println!("{line}");
    }
}

fn header() {
    println!("| label | servers | threads | cache | spec | phase | ops | ops/s | RTT/op | client CPU µs/op | server CPU µs/op |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
}

/// Runs `f(thread index, client)` on every client in parallel; returns the ops done.
fn parallel(clients: &[Arc<Client>], f: impl Fn(usize, &Client) -> FsResult<usize> + Sync) -> anyhow::Result<usize> {
    let total = std::thread::scope(|s| {
        let hs: Vec<_> = clients
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let f = &f;
                s.spawn(move || f(i, c))
            })
            .collect();
        hs.into_iter().map(|h| h.join().map_err(|_| anyhow::anyhow!("bench thread panicked"))).collect::<Vec<_>>()
    });
    let mut n = 0;
    for r in total {
        n += r??;
    }
    Ok(n)
}

fn dirs_of(root: &str, depth: usize, fanout: usize) -> Vec<String> {
    let mut out = vec![root.to_string()];
    let mut level = vec![root.to_string()];
    for _ in 0..depth {
        let mut next = Vec::new();
        for d in &level {
            for b in 0..fanout {
                next.push(format!("{d}/d{b}"));
            }
        }
        out.extend(next.iter().cloned());
        level = next;
    }
    out
}

fn mdtest(ctx: &Ctx, clients: &[Arc<Client>]) -> anyhow::Result<()> {
    let a = &ctx.args;
    let run = format!("/md{}", std::process::id());
    clients[0].mkdir_p(&run, 0o777)?;
    let trees: Vec<Vec<String>> =
        (0..clients.len()).map(|i| dirs_of(&format!("{run}/t{i}"), a.depth, a.fanout)).collect();
    let files = |i: usize| -> Vec<String> {
        trees[i].iter().flat_map(|d| (0..a.items).map(move |k| format!("{d}/f{k}"))).collect()
    };
    let t = ctx.start(clients);
    let n = parallel(clients, |i, c| {
        for d in &trees[i] {
            c.mkdir(d, 0o755)?;
        }
        Ok(trees[i].len())
    })?;
    ctx.report(t, clients, "dir create", n);
    let t = ctx.start(clients);
    let n = parallel(clients, |i, c| {
        let fs = files(i);
        for f in &fs {
            c.create(f, 0o644)?;
        }
        Ok(fs.len())
    })?;
    ctx.report(t, clients, "file create", n);
    // stat the next thread's files (mdtest -N 1), so caches start cold
    let nt = clients.len();
    let t = ctx.start(clients);
    let n = parallel(clients, |i, c| {
        let fs = files((i + 1) % nt);
        for f in &fs {
            c.stat(f)?;
        }
        Ok(fs.len())
    })?;
    ctx.report(t, clients, "file stat", n);
    let t = ctx.start(clients);
    let n = parallel(clients, |i, c| {
        for d in &trees[(i + 1) % nt] {
            c.readdir(d)?;
        }
        Ok(trees[i].len())
    })?;
    ctx.report(t, clients, "dir readdir", n);
    let t = ctx.start(clients);
    let n = parallel(clients, |i, c| {
        let fs = files(i);
        for f in &fs {
            c.rename(f, &format!("{f}.r"))?;
        }
        Ok(fs.len())
    })?;
    ctx.report(t, clients, "file rename", n);
    let leaves = |i: usize| -> Vec<String> {
        trees[i]
            .iter()
            .filter(|d| d.matches('/').count() == trees[i][0].matches('/').count() + a.depth)
            .cloned()
            .collect()
    };
    let t = ctx.start(clients);
    let n = parallel(clients, |i, c| {
        let ls = leaves(i);
        for d in &ls {
            c.rename(d, &format!("{d}.r"))?;
            c.rename(&format!("{d}.r"), d)?;
        }
        Ok(2 * ls.len())
    })?;
    ctx.report(t, clients, "dir rename", n);
    let t = ctx.start(clients);
    let n = parallel(clients, |i, c| {
        let fs = files(i);
        for f in &fs {
            c.unlink(&format!("{f}.r"))?;
        }
        Ok(fs.len())
    })?;
    ctx.report(t, clients, "file remove", n);
    let t = ctx.start(clients);
    let n = parallel(clients, |i, c| {
        for d in trees[i].iter().rev() {
            c.rmdir(d)?;
        }
        Ok(trees[i].len())
    })?;
    ctx.report(t, clients, "dir remove", n);
    Ok(())
}

/// The Pangu datacenter-services mix (InfiniFS via SwitchFS, Table 5):
/// open/close and stat as path lookups, create, delete, file rename,
/// chmod, readdir, statdir.
fn pangu(ctx: &Ctx, clients: &[Arc<Client>]) -> anyhow::Result<()> {
    let a = &ctx.args;
    let run = format!("/pg{}", std::process::id());
    let dirs = dirs_of(&run, a.depth, a.fanout);
    for d in &dirs {
        clients[0].mkdir_p(d, 0o777)?;
    }
    let t = ctx.start(clients);
    let n = parallel(clients, |i, c| {
        let mut rng = StdRng::seed_from_u64(i as u64);
        let mut mine: Vec<String> = Vec::new();
        let mut k = 0usize;
        for _ in 0..a.pangu_ops {
            let d = &dirs[rng.gen_range(0..dirs.len())];
            let x: f64 = rng.gen_range(0.0..100.0);
            let pick = |rng: &mut StdRng, v: &Vec<String>| v.get(rng.gen_range(0..v.len().max(1))).cloned();
            if x < 65.0 || mine.is_empty() && x < 71.7 {
                // open/close (52.6) + stat (12.4): resolve and stat a file
                if let Some(f) = pick(&mut rng, &mine) {
                    let _ = c.stat(&f);
                } else {
                    let _ = c.stat(d);
                }
            } else if x < 74.58 || mine.is_empty() {
                k += 1;
                let f = format!("{d}/p{i}_{k}");
                c.create(&f, 0o644)?;
                mine.push(f);
            } else if x < 86.48 {
                let j = rng.gen_range(0..mine.len());
                let f = mine.swap_remove(j);
                c.unlink(&f)?;
            } else if x < 95.78 {
                let j = rng.gen_range(0..mine.len());
                k += 1;
                let to = format!("{}/p{i}_{k}", dirs[rng.gen_range(0..dirs.len())]);
                c.rename(&mine[j], &to)?;
                mine[j] = to;
            } else if x < 95.88 {
                if let Some(f) = pick(&mut rng, &mine) {
                    c.chmod(&f, 0o640)?;
                }
            } else if x < 99.78 {
                c.readdir_page(d, None, 100)?;
            } else {
                c.stat(d)?;
            }
        }
        for f in mine {
            c.unlink(&f)?;
        }
        Ok(a.pangu_ops)
    })?;
    ctx.report(t, clients, "pangu mix", n);
    Ok(())
}

/// Cold lookups of paths of each depth, speculation on and off.
fn lookup(ctx: &Ctx) -> anyhow::Result<()> {
    let a = &ctx.args;
    let depths: Vec<usize> = a.lookup_depths.split(',').filter_map(|s| s.trim().parse().ok()).collect();
    let maxd = depths.iter().copied().max().unwrap_or(1);
    let base = format!("/lk{}", std::process::id());
    let setup = Client::from_config(&ctx.cfg, ctx.opts.clone());
    let mut chain = base.clone();
    for i in 1..maxd {
        chain = format!("{chain}/c{i}");
    }
    setup.mkdir_p(&chain, 0o755)?;
    println!(
        "\n| servers | depth | spec RTT/lookup | spec µs median (mean) | step RTT/lookup | step µs median (mean) | median ratio |"
    );
    println!("|---|---|---|---|---|---|---|");
    for d in depths {
        let path: String =
            std::iter::once(base.clone()).chain((1..d).map(|i| format!("c{i}"))).collect::<Vec<_>>().join("/");
        // Alternate the two clients lookup by lookup, so both see the same
        // machine noise; report medians (robust to scheduling hiccups).
        let clients: Vec<Client> = [true, false]
            .into_iter()
            .map(|spec| {
                Client::from_config(&ctx.cfg, ClientOptions { cache_capacity: 0, speculate: spec, ..ctx.opts.clone() })
            })
            .collect();
        let mut lat: Vec<Vec<f64>> = (0..2).map(|_| Vec::with_capacity(a.lookups)).collect();
        let mut rounds = [0u64; 2];
        for c in &clients {
            c.stat(&path)?; // connect
        }
        for _ in 0..a.lookups {
            for (k, c) in clients.iter().enumerate() {
                let r0 = c.rounds();
                let t0 = Instant::now();
                c.stat(&path)?;
                lat[k].push(t0.elapsed().as_secs_f64() * 1e6);
                rounds[k] += c.rounds() - r0;
            }
        }
        let stats: Vec<(f64, f64, f64)> = lat
            .iter_mut()
            .zip(rounds)
            .map(|(v, r)| {
                v.sort_by(f64::total_cmp);
                let n = v.len().max(1) as f64;
                (r as f64 / n, v.get(v.len() / 2).copied().unwrap_or(0.0), v.iter().sum::<f64>() / n)
            })
            .collect();
        println!(
            "| {} | {d} | {:.2} | {:.1} ({:.1}) | {:.2} | {:.1} ({:.1}) | {:.2} |",
            ctx.cfg.servers.len(),
            stats[0].0,
            stats[0].1,
            stats[0].2,
            stats[1].0,
            stats[1].1,
            stats[1].2,
            stats[0].1 / stats[1].1.max(1e-9)
        );
    }
    Ok(())
}

/// POSIX phases on a FUSE mount of the service and on a local directory.
fn fuse_vs_local(ctx: &Ctx) -> anyhow::Result<()> {
    let a = &ctx.args;
    let base = std::env::temp_dir().join(format!("strata-fs-posix-{}", std::process::id()));
    let (mnt, data, local) = (base.join("mnt"), base.join("data"), base.join("local"));
    for d in [&mnt, &data, &local] {
        std::fs::create_dir_all(d)?;
    }
    let _guard = TmpDir(base.clone());
    println!("\n| target | threads | phase | ops | ops/s | bench-process CPU µs/op |");
    println!("|---|---|---|---|---|---|");
    {
        let client = Client::from_config(&ctx.cfg, ctx.opts.clone());
        match crate::fuse::spawn(client, &mnt, &data) {
            Ok(session) => {
                crate::bench_posix::run("fuse", &mnt, a.threads, a.depth, a.fanout, a.items)?;
                drop(session);
            }
            Err(e) => println!("| fuse | - | cannot mount here: {e} | | | |"),
        }
    }
    crate::bench_posix::run("local", &local, a.threads, a.depth, a.fanout, a.items)?;
    Ok(())
}

fn on(s: &str) -> bool {
    matches!(s, "on" | "true" | "1" | "yes")
}

/// Runs the benchmark (starting a local cluster unless `config` is given).
pub fn main(args: BenchArgs, config: Option<&Path>) -> anyhow::Result<()> {
    let mut _tmp = None;
    let mut _cluster = None;
    let (cfg, server_pids) = match config {
        Some(p) => (ClusterConfig::load(p)?, Vec::new()),
        None => {
            let exe = std::env::current_exe()?;
            let bin = exe.with_file_name("strata-fs-server");
            let dir = std::env::temp_dir().join(format!("strata-fs-bench-{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            let c = LocalCluster::start(&bin, &dir, args.servers.max(1), args.sync, false)?;
            let pids = (0..c.len()).filter_map(|i| c.pid(i)).map(|p| p.to_string()).collect();
            let cfg = c.config.clone();
            _cluster = Some(c);
            _tmp = Some(TmpDir(dir));
            (cfg, pids)
        }
    };
    let opts = ClientOptions {
        cache_capacity: if on(&args.cache) { 100_000 } else { 0 },
        speculate: on(&args.speculate),
        timeout: Duration::from_secs(60),
        ..Default::default()
    };
    let ctx = Ctx { cfg, server_pids, opts, args: args.clone() };
    let clients: Vec<Arc<Client>> =
        (0..args.threads.max(1)).map(|_| Arc::new(Client::from_config(&ctx.cfg, ctx.opts.clone()))).collect();
    if args.markdown {
        header();
    }
    if matches!(args.mode.as_str(), "mdtest" | "all") {
        mdtest(&ctx, &clients)?;
    }
    if matches!(args.mode.as_str(), "pangu" | "all") {
        pangu(&ctx, &clients)?;
    }
    if matches!(args.mode.as_str(), "lookup" | "all") {
        lookup(&ctx)?;
    }
    if args.mode == "fuse" {
        fuse_vs_local(&ctx)?;
    }
    drop(_cluster);
    Ok(())
}

struct TmpDir(std::path::PathBuf);

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
