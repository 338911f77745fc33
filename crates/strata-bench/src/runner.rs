//! Runs the `--benchmarks` list: opens and destroys the database as
//! db_bench does, starts the threads with db_bench's seeds, prints the
//! result lines and collects the JSON results.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::engine::{Engine, EngineInfo, EngineStats, STRATA_REGION_FILE};
use crate::engines;
use crate::flags::Flags;
use crate::keygen::{KeyOrder, Mt64};
use crate::keyspace::KeySpace;
use crate::measure::{Budget, Merged, Recorder};
use crate::report::{self, BenchResult, JsonReport};
use crate::sysinfo;
use crate::workloads::{self, Ctx, Worker};
use crate::ycsb::Workload;
use crate::ycsb_ops::{self, Layout, YcsbShared};

mod qad;

/// What a benchmark name means.
#[derive(Clone, Debug)]
enum Kind {
    Write(KeyOrder),
    DeleteRandom,
    ReadRandom,
    MultiReadRandom,
    ReadSeq { reverse: bool },
    SeekRandom,
    ReadWhileWriting,
    ReadRandomWriteRandom,
    YcsbLoad,
    Ycsb(Workload),
}

/// A workload benchmark's settings.
#[derive(Clone, Debug)]
struct Spec {
    kind: Kind,
    /// Destroys and recreates the database first (db_bench's `fresh_db`).
    fresh_db: bool,
    /// The histogram's label ("write", "read", ...).
    op: &'static str,
}

fn spec(name: &str) -> Option<Spec> {
    let s = |kind, fresh_db, op| Some(Spec { kind, fresh_db, op });
    match name {
        "fillseq" => s(Kind::Write(KeyOrder::Sequential), true, "write"),
        "fillrandom" | "fillsync" => s(Kind::Write(KeyOrder::Random), true, "write"),
        "overwrite" => s(Kind::Write(KeyOrder::Random), false, "write"),
        "deleterandom" => s(Kind::DeleteRandom, false, "delete"),
        "readrandom" | "readmissing" => s(Kind::ReadRandom, false, "read"),
        "multireadrandom" => s(Kind::MultiReadRandom, false, "multiread"),
        "readseq" => s(Kind::ReadSeq { reverse: false }, false, "read"),
        "readreverse" => s(Kind::ReadSeq { reverse: true }, false, "read"),
        "seekrandom" => s(Kind::SeekRandom, false, "seek"),
        "readwhilewriting" => s(Kind::ReadWhileWriting, false, "read"),
        "readrandomwriterandom" => s(Kind::ReadRandomWriteRandom, false, "op"),
        "ycsbload" => s(Kind::YcsbLoad, true, "insert"),
        other => s(Kind::Ycsb(Workload::by_name(other)?), false, "op"),
    }
}

/// Meta benchmarks that do no timed work.
const META: &[&str] = &["flush", "compact", "waitforcompaction", "stats", "levelstats", "resetstats"];

/// Measures the machine rather than an engine (see [`crate::cpufloor`]).
const CPU_FLOOR: &str = "cpufloor";

/// Whether `name` is a benchmark strata-bench knows.
pub fn known_benchmark(name: &str) -> bool {
    name == CPU_FLOOR || META.contains(&name) || spec(name).is_some() || qad::Method::by_name(name).is_some()
}

/// The benchmark list's state across benchmarks.
pub struct Runner {
    flags: Flags,
    engine: Option<Box<dyn Engine>>,
    seed_base: u64,
    /// db_bench's `total_thread_count_`: thread i of a benchmark gets seed
    /// `seed_base + ++counter`.
    thread_counter: u64,
    ycsb: Arc<YcsbShared>,
    results: Vec<BenchResult>,
    /// The engine's name, version, build and settings, once it has been opened.
    info: Option<(String, EngineInfo)>,
    /// `--partitions`/`--key_ranges`, and whether reads draw survivors only.
    keys: KeySpace,
    out: Box<dyn Write>,
}

impl Runner {
    /// A runner printing to `out`.
    pub fn new(flags: Flags, out: Box<dyn Write>) -> Result<Runner> {
        for name in flags.benchmark_list() {
            if !known_benchmark(&name) {
                bail!("unknown benchmark '{name}'");
            }
        }
        qad::check_layout(&flags)?;
        let mut keys = KeySpace::new(flags.num, flags.parts() as u64, flags.partitions > 1);
        keys.set_survivors_only(flags.read_keys == "survivors");
        let seed_base = if flags.seed == 0 {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_micros() as u64)
                .unwrap_or(1)
        } else {
            flags.seed
        };
        let ycsb = Arc::new(YcsbShared::new(flags.num));
        Ok(Runner {
            flags,
            engine: None,
            seed_base,
            thread_counter: 0,
            ycsb,
            results: Vec::new(),
            info: None,
            keys,
            out,
        })
    }

    /// The results so far.
    pub fn results(&self) -> &[BenchResult] {
        &self.results
    }

    fn say(&mut self, text: &str) -> Result<()> {
        writeln!(self.out, "{text}").context("writing output")?;
        self.out.flush().context("writing output")
    }

    /// Runs every benchmark in order; writes `--json` after each one.
    pub fn run_all(&mut self) -> Result<()> {
        if self.flags.seed == 0 {
            let text = format!("Set seed to {} because --seed was 0", self.seed_base);
            self.say(&text)?;
        }
        self.header()?;
        let list = self.flags.benchmark_list();
        // cpufloor alone needs no database (and must not leave one behind).
        if list.iter().any(|n| n != CPU_FLOOR) {
            if !self.flags.use_existing_db {
                engines::destroy(&self.flags)?;
            }
            self.engine = Some(engines::open(&self.flags)?);
            self.describe_engine()?;
        }
        for name in list {
            self.run_one(&name)?;
            self.write_json()?;
        }
        if let Some(e) = self.engine.take() {
            e.close()?;
        }
        Ok(())
    }

    fn header(&mut self) -> Result<()> {
        let f = &self.flags;
        let pm = match &f.pm_dir {
            Some(p) => p.display().to_string(),
            None => format!("{}/pm (in the data directory)", f.db.display()),
        };
        let strata = f.engine == "strata";
        let profile = if strata {
            format!(" (profile {})", f.profile.as_deref().unwrap_or("engine default"))
        } else {
            String::new()
        };
        let pm_line = if strata {
            format!("PM file dir: {pm}  (pm_write_latency_ns={})\n", f.pm_write_latency_ns)
        } else {
            String::new()
        };
        let text = format!(
            "strata-bench {}: engine {}{profile}\nKeys:       {} bytes each\nValues:     {} bytes each ({} bytes after compression)\n\
             Entries:    {}\nCompression: {}\n{pm_line}DB path:    [{}]\n{}",
            env!("CARGO_PKG_VERSION"),
            f.engine,
            f.key_size,
            f.value_size,
            (f.value_size as f64 * f.compression_ratio) as u64,
            f.num,
            f.compression_type,
            f.db.display(),
            "-".repeat(48)
        );
        self.say(&text)
    }

    /// Prints the engine's version, build and non-default settings once,
    /// after the header (db_bench prints its version first too).
    fn describe_engine(&mut self) -> Result<()> {
        let e = self.engine()?;
        let (name, info) = (e.name(), e.info());
        let non_default: Vec<String> = info.non_default().map(|s| format!("{}={}", s.name, s.value)).collect();
        let text = format!(
            "Engine:     {name} {}\nBuild:      {}\nNon-default settings: {}\n{}",
            info.version,
            info.build,
            if non_default.is_empty() { "none".to_string() } else { non_default.join(", ") },
            "-".repeat(48)
        );
        self.info = Some((name, info));
        self.say(&text)
    }

    fn engine(&self) -> Result<&dyn Engine> {
        self.engine.as_deref().ok_or_else(|| anyhow!("database is not open"))
    }

    fn write_json(&self) -> Result<()> {
        let Some(path) = &self.flags.json else {
            return Ok(());
        };
        let (engine, info) = self.info.clone().unwrap_or_default();
        report::write_json(
            path,
            &JsonReport {
                tool: "strata-bench",
                command_line: std::env::args().collect(),
                seed: self.seed_base,
                engine,
                engine_version: info.version,
                engine_build: info.build,
                engine_settings: &info.settings,
                benchmarks: &self.results,
            },
        )
    }

    fn run_one(&mut self, name: &str) -> Result<()> {
        if name == CPU_FLOOR {
            return self.cpu_floor();
        }
        if META.contains(&name) {
            return self.meta(name);
        }
        if let Some(method) = qad::Method::by_name(name) {
            return self.delete_half(name, method);
        }
        let spec = spec(name).ok_or_else(|| anyhow!("unknown benchmark '{name}'"))?;
        if spec.fresh_db {
            if self.flags.use_existing_db {
                return self.say(&format!("{name:<12} : skipped (--use_existing_db is true)"));
            }
            if let Some(e) = self.engine.take() {
                e.close()?;
            }
            engines::destroy(&self.flags)?;
            self.engine = Some(engines::open(&self.flags)?);
            if matches!(spec.kind, Kind::YcsbLoad) {
                self.ycsb = Arc::new(YcsbShared::new(self.flags.num));
            }
        }
        self.run_workload(name, &spec)
    }

    fn meta(&mut self, name: &str) -> Result<()> {
        self.meta_op(name)?;
        // Record the engine's state after it on the benchmark it follows.
        let s = self.engine()?.stats();
        let store_size_bytes = self.store_usage().total;
        if let Some(last) = self.results.last_mut() {
            let mut end = last.end_state.take().unwrap_or_default();
            end.after.push(name.to_string());
            end.user_bytes_since_open = s.user_bytes_written;
            end.device_bytes_since_open = s.device_bytes_written;
            end.write_amp_since_open = s.write_amp;
            end.nonempty_levels = s.nonempty_levels;
            end.levels = s.levels;
            end.store_size_bytes = store_size_bytes;
            last.end_state = Some(end);
        }
        Ok(())
    }

    fn meta_op(&mut self, name: &str) -> Result<()> {
        match name {
            "flush" => self.engine()?.flush(),
            "compact" => {
                // db_bench runs Compact on --threads threads; keep its seed counter aligned.
                self.thread_counter += self.flags.threads as u64;
                self.engine()?.compact()
            }
            "waitforcompaction" => self.wait_for_compaction(),
            "stats" => {
                let text = self.engine()?.stats_text();
                self.say(&text)
            }
            "levelstats" => {
                let s = self.engine()?.stats();
                let mut text = String::from("Level Files Size(MB)\n--------------------\n");
                for l in &s.levels {
                    text.push_str(&format!("{:>5} {:>8} {:>8.0}\n", l.level, l.files, l.bytes as f64 / 1_048_576.0));
                }
                self.say(&text)
            }
            _ => Ok(()),
        }
    }

    /// StrataKV has no "wait for compactions" call: flush, then poll the
    /// stats until flush and compaction counts and the level shape stay
    /// the same for two seconds (at most ten minutes).
    fn wait_for_compaction(&mut self) -> Result<()> {
        let e = self.engine()?;
        e.flush()?;
        // A long merge changes no counter until it ends: ask the engine
        // first, then wait for the counters to settle as db_bench does.
        e.wait_for_compactions()?;
        let key = |s: &EngineStats| (s.flushes, s.compactions, s.levels.clone());
        let deadline = Instant::now() + Duration::from_secs(600);
        let mut last = key(&e.stats());
        let mut stable_since = Instant::now();
        while Instant::now() < deadline && stable_since.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(100));
            let now = key(&e.stats());
            if now != last {
                last = now;
                stable_since = Instant::now();
            }
        }
        Ok(())
    }

    /// Times units of pure CPU work as long as the last benchmark's mean
    /// operation (or `--cpufloor_unit_ns`) for `--duration` seconds (5).
    fn cpu_floor(&mut self) -> Result<()> {
        let last_op_ns = self.results.last().map(|r| r.micros_per_op * 1000.0).filter(|ns| *ns >= 1.0);
        let unit_ns = match self.flags.cpufloor_unit_ns {
            0 => last_op_ns.map_or(3000, |ns| ns as u64),
            ns => ns,
        };
        let secs = if self.flags.duration > 0 { self.flags.duration } else { 5 };
        let floor = crate::cpufloor::measure(Duration::from_nanos(unit_ns), Duration::from_secs(secs));
        self.say(&floor.line())
    }

    fn next_seed(&mut self) -> u64 {
        self.thread_counter += 1;
        self.seed_base.wrapping_add(self.thread_counter)
    }

    fn run_workload(&mut self, name: &str, spec: &Spec) -> Result<()> {
        let f = self.flags.clone();
        let extra_writer = matches!(spec.kind, Kind::ReadWhileWriting);
        let n = f.threads + usize::from(extra_writer);
        let seeds: Vec<u64> = (0..n).map(|_| self.next_seed()).collect();
        let duration = (f.duration > 0).then(|| Duration::from_secs(f.duration));
        let (num, ops) = match (&spec.kind, name) {
            (_, "fillsync") => ((f.num / 1000).max(1), f.writes_per_thread()),
            (Kind::Write(_) | Kind::DeleteRandom, _) => (f.num, f.writes_per_thread()),
            (Kind::ReadRandomWriteRandom, _) if f.reads < 0 && f.writes < 0 => (f.num, f.num),
            (Kind::ReadRandomWriteRandom, _) => (f.num, f.reads.max(f.writes).max(0) as u64),
            _ => (f.num, f.reads_per_thread()),
        };
        let stop = AtomicBool::new(false);
        let live = Arc::new(AtomicU64::new(0));
        let keys = self.keys.clone();
        let engine = self.engine()?;
        let ctx = Ctx {
            engine,
            key_size: f.key_size + usize::from(name == "readmissing"),
            value_size: f.value_size,
            compression_ratio: f.compression_ratio,
            num,
            budget: Budget { ops, duration },
            batch_size: f.batch_size,
            sync: f.sync || name == "fillsync",
            seek_nexts: f.seek_nexts,
            readwritepercent: f.readwritepercent,
            stop: &stop,
            keys: &keys,
        };
        let before = engine.stats();
        let (io_read0, io_write0) = sysinfo::proc_io();
        let cpu0 = sysinfo::proc_cpu_secs();
        let ycsb = self.ycsb.clone();
        let layout = Layout { fields: f.ycsb_fieldcount, field_len: f.ycsb_fieldlength };
        let barrier = Barrier::new(n);
        let finished_readers = AtomicU64::new(0);
        let readers = (n - usize::from(extra_writer)) as u64;
        let interval = f.stats_interval_seconds;
        let all_done = AtomicBool::new(false);

        let outcomes: Vec<Result<Recorder>> = std::thread::scope(|s| {
            let handles: Vec<_> = seeds
                .iter()
                .enumerate()
                .map(|(tid, &seed)| {
                    let (ctx, spec, ycsb, barrier, live) = (&ctx, spec, &ycsb, &barrier, live.clone());
                    let (finished_readers, stop) = (&finished_readers, &stop);
                    let threads = f.threads;
                    let ops_total = f.num;
                    s.spawn(move || -> Result<Recorder> {
                        let mut w = Worker { tid, rng: Mt64::new(seed), rec: Recorder::new(live) };
                        barrier.wait();
                        let r = match &spec.kind {
                            Kind::Write(order) => workloads::write(ctx, &mut w, *order),
                            Kind::DeleteRandom => workloads::delete_random(ctx, &mut w),
                            Kind::ReadRandom => workloads::read_random(ctx, &mut w),
                            Kind::MultiReadRandom => workloads::multi_read_random(ctx, &mut w),
                            Kind::ReadSeq { reverse } => workloads::read_sequential(ctx, &mut w, *reverse),
                            Kind::SeekRandom => workloads::seek_random(ctx, &mut w),
                            Kind::ReadRandomWriteRandom => workloads::read_random_write_random(ctx, &mut w),
                            Kind::ReadWhileWriting if w.tid == 0 => workloads::background_writer(ctx, &mut w),
                            Kind::ReadWhileWriting => workloads::read_random(ctx, &mut w),
                            Kind::YcsbLoad => {
                                let per = ops_total.div_ceil(threads as u64);
                                let lo = (tid as u64 * per).min(ops_total);
                                ycsb_ops::load(ctx, &mut w, layout, lo..(lo + per).min(ops_total))
                            }
                            Kind::Ycsb(wl) => ycsb_ops::run(ctx, &mut w, wl, ycsb, layout, threads),
                        };
                        let is_writer = extra_writer && w.tid == 0;
                        if !is_writer && finished_readers.fetch_add(1, Ordering::AcqRel) + 1 == readers {
                            stop.store(true, Ordering::Release);
                        }
                        if r.is_err() {
                            // Let a background writer end if a reader failed.
                            stop.store(true, Ordering::Release);
                        }
                        r.map(|()| w.rec)
                    })
                })
                .collect();
            if interval > 0 {
                let (live, all_done) = (live.clone(), &all_done);
                s.spawn(move || interval_reporter(&live, all_done, interval));
            }
            let out = handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(anyhow!("a benchmark thread panicked"))))
                .collect();
            all_done.store(true, Ordering::Release);
            out
        });
        let mut recorders = Vec::with_capacity(n);
        for o in outcomes {
            recorders.push(o.with_context(|| format!("benchmark {name}"))?);
        }
        let writer_ops = if extra_writer { recorders.first().map(|r| r.ops) } else { None };
        let merged =
            if extra_writer { Merged::from(recorders.get(1..).unwrap_or(&[])) } else { Merged::from(&recorders) };
        if matches!(spec.kind, Kind::YcsbLoad) {
            self.ycsb = Arc::new(YcsbShared::new(f.num));
        }
        let after = self.engine()?.stats();
        let (io_read1, io_write1) = sysinfo::proc_io();
        let message = message(name, &spec.kind, &merged, num);
        let mut text = report::result_line(name, &merged, &message);
        let cpu = sysinfo::proc_cpu_secs() - cpu0;
        if merged.ops > 0 {
            // Every thread of the process: callers, workers, flushes and compactions.
            text.push_str(&format!(
                "\n{:<12} : {:>11.3} cpu micros/op ({:.2} cpu seconds, user+system, whole process)",
                "",
                cpu * 1e6 / merged.ops as f64,
                cpu
            ));
        }
        if f.histogram {
            text.push('\n');
            text.push_str(&report::histogram_text(spec.op, &merged));
        }
        self.say(&text)?;
        let info = self.info.as_ref().map(|(_, i)| i);
        let mut r = BenchResult {
            benchmark: name.to_string(),
            engine: self.engine()?.name(),
            engine_version: info.map(|i| i.version.clone()).unwrap_or_default(),
            engine_build: info.map(|i| i.build.clone()).unwrap_or_default(),
            threads: f.threads,
            bg_write_ops: writer_ops,
            ..Default::default()
        };
        r.set_measurement(&merged);
        self.fill_engine_fields(&mut r, &before, &after);
        if let Some(blocks) = r.data_blocks_read {
            r.data_blocks_per_found_get = (merged.found > 0).then(|| blocks as f64 / merged.found as f64);
        }
        r.proc_write_bytes = io_write1.saturating_sub(io_write0);
        r.proc_read_bytes = io_read1.saturating_sub(io_read0);
        self.results.push(r);
        Ok(())
    }

    fn fill_engine_fields(&self, r: &mut BenchResult, before: &EngineStats, after: &EngineStats) {
        r.user_bytes_written = after.user_bytes_written.saturating_sub(before.user_bytes_written);
        r.device_bytes_written = after.device_bytes_written.saturating_sub(before.device_bytes_written);
        r.pm_bytes_written = after.pm_bytes_written.saturating_sub(before.pm_bytes_written);
        r.write_amp =
            if r.user_bytes_written > 0 { r.device_bytes_written as f64 / r.user_bytes_written as f64 } else { 0.0 };
        r.write_amp_since_open = after.write_amp;
        r.stall_micros = after.stall_micros.saturating_sub(before.stall_micros);
        r.flushes = after.flushes.saturating_sub(before.flushes);
        r.compactions = after.compactions.saturating_sub(before.compactions);
        r.nonempty_levels = after.nonempty_levels;
        r.levels = after.levels.clone();
        r.pm_placement = after.pm_placement.clone();
        if let (Some(b), Some(a)) = (before.reads, after.reads) {
            let gets = a.gets.saturating_sub(b.gets);
            let blocks = a.blocks.saturating_sub(b.blocks);
            r.gets = Some(gets);
            r.data_blocks_read = Some(blocks);
            r.data_blocks_from_file = Some(a.from_file.saturating_sub(b.from_file));
            r.data_blocks_per_get = (gets > 0).then(|| blocks as f64 / gets as f64);
        }
        r.index_dram_bytes = after.index_dram_bytes;
        r.pm_index_bytes = after.pm_index_bytes;
        r.tables = after.tables.clone();
        r.pm_write_latency_ns = self.flags.pm_write_latency_ns;
        let usage = self.store_usage();
        (r.db_size_bytes, r.pm_file_bytes, r.store_size_bytes) = (usage.db, usage.pm_file, usage.total);
        r.pm_dir = self.pm_dir().map(|dir| dir.display().to_string());
        r.peak_rss_bytes = sysinfo::peak_rss_bytes();
    }

    fn pm_dir(&self) -> Option<std::path::PathBuf> {
        self.engine.as_ref().and_then(|e| e.pm_dir())
    }

    /// Disk space of the database directory and the PM region file now.
    fn store_usage(&self) -> sysinfo::StoreUsage {
        let pm_file = self.pm_dir().map(|dir| dir.join(STRATA_REGION_FILE));
        sysinfo::store_usage(&self.flags.db, pm_file.as_deref())
    }
}

/// The parenthesised part of db_bench's result line.
fn message(name: &str, kind: &Kind, m: &Merged, num: u64) -> String {
    let c = |k: &str| m.counts.get(k).copied().unwrap_or(0);
    match kind {
        Kind::ReadRandom | Kind::MultiReadRandom | Kind::SeekRandom | Kind::ReadWhileWriting => {
            format!("({} of {} found)", m.found, m.ops)
        }
        Kind::ReadRandomWriteRandom => {
            format!("( reads:{} writes:{} total:{} found:{})", c("reads"), c("writes"), m.ops, m.found)
        }
        Kind::Ycsb(_) => {
            let parts: Vec<String> = m.counts.iter().map(|(k, v)| format!("{k}:{v}")).collect();
            format!("({} found:{})", parts.join(" "), m.found)
        }
        Kind::Write(_) if name == "fillsync" => format!("({num} ops)"),
        _ => String::new(),
    }
}

/// Prints the throughput of each interval until `done`.
fn interval_reporter(live: &AtomicU64, done: &AtomicBool, every_s: u64) {
    let start = Instant::now();
    let (mut last_t, mut last_ops) = (start, 0u64);
    while !done.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(50));
        if last_t.elapsed() >= Duration::from_secs(every_s) {
            let now = Instant::now();
            let ops = live.load(Ordering::Relaxed);
            let secs = now.duration_since(last_t).as_secs_f64();
            println!(
                "... {:.1} s: {} ops in {:.1} s, {:.0} ops/sec (total {} ops)",
                now.duration_since(start).as_secs_f64(),
                ops - last_ops,
                secs,
                (ops - last_ops) as f64 / secs,
                ops
            );
            (last_t, last_ops) = (now, ops);
        }
    }
}
