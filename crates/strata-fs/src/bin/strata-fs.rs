//! `strata-fs`: command-line client of the namespace service (ls, mkdir,
//! touch, stat, mv, rm, chmod, chown, check), its benchmark, and a local
//! cluster launcher.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use strata_fs::bench::{self, BenchArgs};
use strata_fs::config::ClusterConfig;
use strata_fs::types::{Cred, Kind};
use strata_fs::{Client, ClientOptions, FsError};

/// Client of the strata-fs namespace service.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    /// Cluster config file (lines `id addr datadir`); or $STRATA_FS_CONFIG.
    #[arg(long, short, global = true)]
    config: Option<PathBuf>,
    /// Act as this uid (default 0, root).
    #[arg(long, global = true, default_value_t = 0)]
    uid: u32,
    /// Act as this gid.
    #[arg(long, global = true, default_value_t = 0)]
    gid: u32,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// List a directory.
    Ls {
        /// Directory (default /).
        #[arg(default_value = "/")]
        path: String,
        /// Long format: kind, mode, owner, id.
        #[arg(short)]
        long: bool,
    },
    /// Make directories.
    Mkdir {
        /// Directories to make.
        paths: Vec<String>,
        /// Make parents as needed; no error if it exists.
        #[arg(short)]
        parents: bool,
        /// Mode (octal).
        #[arg(short, long, default_value = "755")]
        mode: String,
    },
    /// Create empty files (no error if they exist).
    Touch {
        /// Files to create.
        paths: Vec<String>,
    },
    /// Show an entry's attributes.
    Stat {
        /// Entries.
        paths: Vec<String>,
    },
    /// Rename (into DST if DST is a directory).
    Mv {
        /// Source.
        src: String,
        /// Destination.
        dst: String,
    },
    /// Remove files (and directories with -r).
    Rm {
        /// Entries to remove.
        paths: Vec<String>,
        /// Remove directories and their contents.
        #[arg(short)]
        recursive: bool,
    },
    /// Change permission bits (octal).
    Chmod {
        /// Mode (octal).
        mode: String,
        /// Entries.
        paths: Vec<String>,
    },
    /// Change owner (UID[:GID]).
    Chown {
        /// UID[:GID].
        owner: String,
        /// Entries.
        paths: Vec<String>,
    },
    /// Check the tree's invariants on every server.
    Check,
    /// Mount the namespace with FUSE (until `umount DIR`).
    Mount {
        /// Mount point.
        dir: PathBuf,
        /// Directory holding file contents (one file per file id).
        #[arg(long, default_value = "strata-fs-data")]
        data: PathBuf,
    },
    /// Metadata benchmark (mdtest-style phases, Pangu mix, lookup depth).
    Bench(BenchArgs),
}

fn octal(s: &str) -> Result<u32, FsError> {
    u32::from_str_radix(s, 8).map_err(|_| FsError::Invalid(format!("bad mode {s}")))
}

fn kind_char(k: Kind) -> char {
    match k {
        Kind::Dir => 'd',
        Kind::File => '-',
    }
}

fn run(mut cli: Cli) -> anyhow::Result<()> {
    if cli.config.is_none() {
        cli.config = std::env::var_os("STRATA_FS_CONFIG").map(PathBuf::from);
    }
    if let Cmd::Bench(args) = cli.cmd {
        return bench::main(args, cli.config.as_deref());
    }
    let path = cli.config.ok_or_else(|| anyhow::anyhow!("--config or STRATA_FS_CONFIG is required"))?;
    let cfg = ClusterConfig::load(&path)?;
    let opts = ClientOptions { cred: Cred::user(cli.uid, cli.gid), ..Default::default() };
    let fs = Client::from_config(&cfg, opts);
    match cli.cmd {
        Cmd::Ls { path, long } => {
            if fs.stat(&path)?.kind == Kind::File {
                println!("{path}");
                return Ok(());
            }
            for e in fs.readdir(&path)? {
                if long {
                    let p = e.rec.perm;
                    println!(
                        "{}{:04o} {:>5} {:>5} {:016x} {}",
                        kind_char(e.rec.kind),
                        p.mode,
                        p.uid,
                        p.gid,
                        e.rec.id,
                        e.name
                    );
                } else {
                    println!("{}{}", e.name, if e.rec.kind == Kind::Dir { "/" } else { "" });
                }
            }
        }
        Cmd::Mkdir { paths, parents, mode } => {
            let mode = octal(&mode)?;
            for p in paths {
                if parents {
                    fs.mkdir_p(&p, mode)?;
                } else {
                    fs.mkdir(&p, mode)?;
                }
            }
        }
        Cmd::Touch { paths } => {
            for p in paths {
                match fs.create(&p, 0o644) {
                    Ok(_) | Err(FsError::Exists) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Cmd::Stat { paths } => {
            for p in paths {
                let a = fs.stat(&p)?;
                println!(
                    "{p}: {:?} id={:016x} mode={:04o} uid={} gid={} size={} mtime_ns={}",
                    a.kind, a.id, a.perm.mode, a.perm.uid, a.perm.gid, a.size, a.mtime_ns
                );
            }
        }
        Cmd::Mv { src, dst } => {
            let dst = match fs.stat(&dst) {
                Ok(a) if a.kind == Kind::Dir => {
                    let base = src.trim_end_matches('/').rsplit('/').next().unwrap_or("").to_string();
                    format!("{}/{base}", dst.trim_end_matches('/'))
                }
                _ => dst,
            };
            fs.rename(&src, &dst)?;
        }
        Cmd::Rm { paths, recursive } => {
            for p in paths {
                match (fs.stat(&p)?.kind, recursive) {
                    (Kind::File, _) => fs.unlink(&p)?,
                    (Kind::Dir, true) => fs.remove_all(&p)?,
                    (Kind::Dir, false) => return Err(FsError::IsDir.into()),
                }
            }
        }
        Cmd::Chmod { mode, paths } => {
            let mode = octal(&mode)?;
            for p in paths {
                fs.chmod(&p, mode)?;
            }
        }
        Cmd::Chown { owner, paths } => {
            let mut it = owner.splitn(2, ':');
            let parse = |s: Option<&str>| -> anyhow::Result<Option<u32>> {
                Ok(match s {
                    Some(v) if !v.is_empty() => Some(v.parse()?),
                    _ => None,
                })
            };
            let (uid, gid) = (parse(it.next())?, parse(it.next())?);
            for p in paths {
                fs.chown(&p, uid, gid)?;
            }
        }
        Cmd::Check => {
            let peers = strata_fs::rpc::Peers::new(cfg.addrs(), std::time::Duration::from_secs(30));
            let rep = strata_fs::check::check(&peers)?;
            println!(
                "{} entries, {} access records, {} content records, {} violation(s)",
                rep.tree.len(),
                rep.access_records,
                rep.content_records,
                rep.violations.len()
            );
            for v in &rep.violations {
                println!("  {v}");
            }
            if !rep.violations.is_empty() {
                anyhow::bail!("the tree is not sound");
            }
        }
        Cmd::Mount { dir, data } => {
            let opts = ClientOptions { cred: Cred::root(), ..Default::default() };
            strata_fs::fuse::mount(Client::from_config(&cfg, opts), &dir, &data)?;
        }
        Cmd::Bench(_) => {}
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strata-fs: {e}");
            let code = e.downcast_ref::<FsError>().map_or(1, |f| f.errno().clamp(1, 255));
            ExitCode::from(code as u8)
        }
    }
}
