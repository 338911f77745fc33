//! `strata`: command-line access to a StrataKV data directory.
//!
//! ```text
//! strata --dir DIR put KEY VALUE      durable when it exits 0
//! strata --dir DIR get KEY            prints the value; exit status 1 if absent
//! strata --dir DIR delete KEY
//! strata --dir DIR scan [--from K] [--to K] [--limit N]   key<TAB>value per line
//! strata --dir DIR stats              levels, files, bytes, PM usage
//! strata --dir DIR check              verifies every checksum; non-zero exit on corruption
//!                                     (a sharded directory: every shard, after its redo)
//! strata --dir DIR compact            compacts the whole key space
//! strata --dir DIR dump sst|manifest|pm [FILE]
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use stratakv::tooling::InternalIterator;
use stratakv::tooling::ParsedKey;
use stratakv::{Db, KeyRange, Options, Partition, WriteOptions};

#[derive(Parser, Debug)]
#[command(name = "strata", version, about = "Command-line access to a StrataKV data directory")]
struct Cli {
    /// The data directory.
    #[arg(long, default_value = "./strata-data")]
    dir: PathBuf,
    /// Directory of the PM region file (default: DIR/pm).
    #[arg(long)]
    pm_dir: Option<PathBuf>,
    /// Keys and values on the command line and in output are hex-encoded.
    #[arg(long)]
    hex: bool,
    /// The partition put/get/delete/scan/delete-range/compact work on
    /// (`put` creates it if it does not exist).
    #[arg(long, default_value = stratakv::DEFAULT_PARTITION)]
    partition: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Sets KEY to VALUE (synced before exit).
    Put { key: String, value: String },
    /// Prints the value of KEY; exit status 1 if absent.
    Get { key: String },
    /// Removes KEY (synced before exit).
    Delete { key: String },
    /// Prints key<TAB>value lines in key order.
    Scan {
        /// First key (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// Last key (exclusive).
        #[arg(long)]
        to: Option<String>,
        /// At most this many lines.
        #[arg(long)]
        limit: Option<usize>,
        /// Print keys only.
        #[arg(long)]
        keys_only: bool,
        /// Newest-last order reversed (descending keys).
        #[arg(long)]
        reverse: bool,
    },
    /// Removes every key in [FROM, TO) with one range tombstone (synced).
    DeleteRange { from: String, to: String },
    /// Lists, creates or drops partitions.
    Partition {
        #[command(subcommand)]
        what: PartitionCmd,
    },
    /// Prints levels, files, bytes, PM usage and the partitions.
    Stats,
    /// Verifies every checksum of every file; non-zero exit on corruption.
    Check,
    /// Compacts the whole key space (drops overwritten data and tombstones).
    Compact,
    /// Prints the raw contents of a file.
    Dump {
        #[command(subcommand)]
        what: Dump,
    },
}

#[derive(Subcommand, Debug)]
enum PartitionCmd {
    /// Prints the partitions' names, "default" first.
    List,
    /// Creates partition NAME.
    Create { name: String },
    /// Drops partition NAME with every key in it (O(1): one MANIFEST edit).
    Drop { name: String },
}

#[derive(Subcommand, Debug)]
enum Dump {
    /// Every entry of a table file, with sequence numbers and kinds.
    Sst { file: PathBuf },
    /// Every record of the MANIFEST named by CURRENT.
    Manifest,
    /// The PM region's superblock and extents.
    Pm,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("strata: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn options(cli: &Cli, create: bool) -> Options {
    Options { create_if_missing: create, pm_dir: cli.pm_dir.clone(), ..Options::default() }
}

fn decode(cli: &Cli, s: &str) -> anyhow::Result<Vec<u8>> {
    if cli.hex {
        hex_decode(s).with_context(|| format!("{s:?} is not hex"))
    } else {
        Ok(s.as_bytes().to_vec())
    }
}

fn hex_decode(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn emit(out: &mut impl Write, cli: &Cli, b: &[u8]) -> std::io::Result<()> {
    if cli.hex {
        out.write_all(hex(b).as_bytes())
    } else {
        out.write_all(b)
    }
}

fn open_existing(cli: &Cli) -> anyhow::Result<Db> {
    Db::open(&cli.dir, options(cli, false)).with_context(|| format!("opening {}", cli.dir.display()))
}

/// The partition `--partition` names, in `db`.
fn partition(cli: &Cli, db: &Db) -> anyhow::Result<Partition> {
    db.partition(&cli.partition).with_context(|| format!("no partition {:?} (strata partition list)", cli.partition))
}

/// `check` of a sharded database (`stratakv::Sharded`): opening it reads
/// the shard count, checks the coordinator log and redoes any cross-shard
/// batch a crash left partly applied; then every shard's checksums.
fn check_sharded(cli: &Cli) -> anyhow::Result<ExitCode> {
    let n = stratakv::recorded_shards(&cli.dir)?.unwrap_or(1);
    let db = stratakv::Sharded::open(&cli.dir, stratakv::ShardedOptions::new(n, options(cli, false)))
        .with_context(|| format!("opening sharded {}", cli.dir.display()))?;
    let entries = db.verify_checksums()?;
    let s = db.stats();
    let files: usize = s.shards.iter().flat_map(|sh| sh.levels.iter()).map(|l| l.files).sum();
    println!(
        "ok: sharded, {n} shards (SHARDS, COORD and every shard's MANIFEST valid); {files} tables, {entries} \
         entries verified; {} cross-shard parts redone; last GSN {}",
        s.redone_parts, s.gsn
    );
    db.close()?;
    Ok(ExitCode::SUCCESS)
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let sync = WriteOptions { sync: true };
    match &cli.cmd {
        Cmd::Put { key, value } => {
            let db = Db::open(&cli.dir, options(&cli, true))?;
            let p = db.partition_or_create(&cli.partition)?;
            p.put_opt(decode(&cli, key)?, decode(&cli, value)?, &sync)?;
            drop(p);
            db.close()?;
        }
        Cmd::Get { key } => {
            let db = open_existing(&cli)?;
            match partition(&cli, &db)?.get(decode(&cli, key)?)? {
                Some(v) => {
                    let mut out = std::io::stdout().lock();
                    emit(&mut out, &cli, &v)?;
                    out.write_all(b"\n")?;
                }
                None => return Ok(ExitCode::from(1)),
            }
        }
        Cmd::Delete { key } => {
            let db = open_existing(&cli)?;
            partition(&cli, &db)?.delete_opt(decode(&cli, key)?, &sync)?;
            db.close()?;
        }
        Cmd::DeleteRange { from, to } => {
            let db = open_existing(&cli)?;
            // Durable on return: its tombstone is in the (fsynced) MANIFEST.
            partition(&cli, &db)?.delete_range(decode(&cli, from)?, decode(&cli, to)?)?;
            db.close()?;
        }
        Cmd::Partition { what } => {
            let db = Db::open(&cli.dir, options(&cli, matches!(what, PartitionCmd::Create { .. })))
                .with_context(|| format!("opening {}", cli.dir.display()))?;
            match what {
                PartitionCmd::List => {
                    for name in db.list_partitions() {
                        println!("{name}");
                    }
                }
                PartitionCmd::Create { name } => drop(db.create_partition(name)?),
                PartitionCmd::Drop { name } => db.drop_partition(name)?,
            }
            db.close()?;
        }
        Cmd::Scan { from, to, limit, keys_only, reverse } => {
            let db = open_existing(&cli)?;
            let start = match from {
                Some(f) => std::ops::Bound::Included(decode(&cli, f)?),
                None => std::ops::Bound::Unbounded,
            };
            let end = match to {
                Some(t) => std::ops::Bound::Excluded(decode(&cli, t)?),
                None => std::ops::Bound::Unbounded,
            };
            let mut it = partition(&cli, &db)?.iter(KeyRange { start, end })?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let limit = limit.unwrap_or(usize::MAX);
            let items: Box<dyn Iterator<Item = (Vec<u8>, Vec<u8>)>> =
                if *reverse { Box::new(it.by_ref().rev()) } else { Box::new(it.by_ref()) };
            for (k, v) in items.take(limit) {
                emit(&mut out, &cli, &k)?;
                if !keys_only {
                    out.write_all(b"\t")?;
                    emit(&mut out, &cli, &v)?;
                }
                out.write_all(b"\n")?;
            }
            out.flush()?;
            drop(out);
            if let Err(e) = it.status() {
                bail!("scan stopped: {e}");
            }
        }
        Cmd::Stats => {
            let db = open_existing(&cli)?;
            print!("{}", db.stats());
        }
        Cmd::Check if stratakv::recorded_shards(&cli.dir)?.is_some() => return check_sharded(&cli),
        Cmd::Check => {
            let db = open_existing(&cli)?;
            let entries = db.verify_checksums()?;
            let s = db.stats();
            let files: usize = s.levels.iter().map(|l| l.files).sum();
            println!(
                "ok: MANIFEST and CURRENT valid; {files} tables, {entries} entries verified; \
                 PM log recovered {} entries ({} placement)",
                s.memtable_entries, s.pm_placement
            );
        }
        Cmd::Compact => {
            let db = open_existing(&cli)?;
            partition(&cli, &db)?.compact_range(..)?;
            print!("{}", db.stats());
        }
        Cmd::Dump { what } => dump(&cli, what)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn dump(cli: &Cli, what: &Dump) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match what {
        Dump::Sst { file } => {
            let fs = stratakv::fs::StdFs;
            let t = Arc::new(stratakv::tooling::Table::open(&fs, file, 0, None)?);
            let p = t.props();
            writeln!(
                out,
                "# {}: {} entries ({} deletions), {} data blocks, seq {}..{}",
                file.display(),
                p.entries,
                p.deletions,
                p.data_blocks,
                p.smallest_seq,
                p.largest_seq
            )?;
            let mut it = t.iter();
            it.seek_to_first()?;
            while it.valid() {
                match ParsedKey::parse(it.key()) {
                    Some(k) => {
                        emit(&mut out, cli, k.user_key)?;
                        write!(out, " @{} {:?}\t", k.seq, k.kind)?;
                        emit(&mut out, cli, it.value())?;
                        writeln!(out)?;
                    }
                    None => writeln!(out, "<malformed key {}>", hex(it.key()))?,
                }
                it.next()?;
            }
        }
        Dump::Manifest => {
            let cur = std::fs::read_to_string(cli.dir.join("CURRENT")).context("reading CURRENT")?;
            let path = cli.dir.join(cur.trim());
            let data = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            let (records, torn) = stratakv::tooling::decode_manifest_records(&data, &path)?;
            writeln!(out, "# {}: {} records{}", path.display(), records.len(), if torn { " (torn tail)" } else { "" })?;
            for (off, rec) in records {
                let e = stratakv::tooling::VersionEdit::decode(rec)
                    .map_err(|why| anyhow::anyhow!("record at {off}: {why}"))?;
                writeln!(out, "@{off}: {e:?}")?;
            }
        }
        Dump::Pm => dump_pm(cli, &mut out)?,
    }
    out.flush()?;
    Ok(())
}

fn dump_pm(cli: &Cli, out: &mut impl Write) -> anyhow::Result<()> {
    let pm_dir = cli.pm_dir.clone().unwrap_or_else(|| cli.dir.join("pm"));
    let path = pm_dir.join("strata.pm");
    // Hold the database lock so nobody writes the region meanwhile.
    let _lock = stratakv::fs::Fs::lock(&stratakv::fs::StdFs, &cli.dir.join("LOCK"))
        .with_context(|| format!("{} is in use", cli.dir.display()))?;
    let opts =
        strata_pmem::RegionOptions { len: 0, slot_bytes: 4096, write_latency_ns: 0, create: false, expect_id: None };
    let (region, _) = strata_pmem::Region::open(strata_pmem::Backing::File(path.clone()), &opts)?;
    writeln!(
        out,
        "# {}: {} bytes, {} placement, id {:#x}, {} slots of {} bytes",
        path.display(),
        region.len(),
        region.placement().name(),
        region.id(),
        region.slot_count(),
        region.slot_bytes()
    )?;
    for i in 0..strata_pmem::ROOT_WORDS {
        let w = region.root(i)?;
        if w != 0 {
            writeln!(out, "root[{i}] = {w:#x}")?;
        }
    }
    for h in region.heads()? {
        let kind = match h.kind {
            stratakv::tooling::EXTENT_KIND_LOG => "log",
            stratakv::tooling::EXTENT_KIND_ROW => "row",
            stratakv::tooling::EXTENT_KIND_TREE => "tree",
            _ => "?",
        };
        writeln!(out, "extent at slot {:>5}: {kind:<3} number {:>8}, {} slots", h.slot, h.number, h.slots)?;
    }
    Ok(())
}
