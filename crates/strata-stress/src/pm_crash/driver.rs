//! What the plain and the sharded pm-crash modes share: checker threads
//! that recover each crash point the writer hands them, the episode loop,
//! and one report. A violation stops both.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Sender;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::report::{Report, Value};
use crate::RunCfg;

/// The report and the stop flag, shared by the writer and the checkers.
pub struct Shared {
    /// Counters and violations so far.
    pub report: Mutex<Report>,
    /// Set at the first violation.
    pub stop: AtomicBool,
}

/// Runs episodes until the deadline or a violation. `check` recovers one
/// crash point `P` (in a checker thread, without the report's lock) and
/// `record` adds what it found; `episode(seed, deadline, points, shared)`
/// runs one episode, handing its points to the checkers. Both return
/// violations as `(episode seed, message)`.
pub fn run_mode<P, K>(
    cfg: &RunCfg,
    first: Report,
    check: impl Fn(&P, &mut StdRng) -> Result<K, (u64, String)> + Clone + Send + 'static,
    record: impl Fn(&P, K, &mut Report) + Clone + Send + 'static,
    mut episode: impl FnMut(u64, Instant, &Sender<P>, &Shared) -> Result<(), String>,
) -> Report
where
    P: Send + 'static,
{
    let shared = Arc::new(Shared { report: Mutex::new(first), stop: AtomicBool::new(false) });
    let (tx, rx) = crossbeam_channel::bounded::<P>(cfg.jobs.max(1));
    let mut checkers = Vec::new();
    for j in 0..cfg.jobs.max(1) {
        let (rx, shared, check, record) = (rx.clone(), shared.clone(), check.clone(), record.clone());
        let seed = cfg.seed ^ (j as u64).wrapping_mul(0x9e37_79b9);
        checkers.push(std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(seed);
            for p in rx.iter() {
                if shared.stop.load(Ordering::Relaxed) {
                    continue;
                }
                let r = check(&p, &mut rng);
                let mut rep = shared.report.lock();
                match r {
                    Ok(k) => record(&p, k, &mut rep),
                    Err((seed, e)) => {
                        rep.violation(seed, e);
                        shared.stop.store(true, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    let deadline = cfg.deadline();
    let mut n = 0u64;
    while Instant::now() < deadline && !shared.stop.load(Ordering::Relaxed) {
        let seed = cfg.seed.wrapping_add(n);
        let r = episode(seed, deadline, &tx, &shared);
        let mut rep = shared.report.lock();
        rep.add("episodes", 1);
        if let Err(e) = r {
            rep.violation(seed, e);
            shared.stop.store(true, Ordering::Relaxed);
        }
        if cfg.verbose {
            eprintln!("pm-crash: episode {n} done: {}", rep.json());
        }
        n += 1;
    }
    drop(tx);
    for c in checkers {
        let _ = c.join();
    }
    let Ok(shared) = Arc::try_unwrap(shared) else { return Report::new("pm-crash", cfg.seed) };
    let mut rep = shared.report.into_inner();
    let states = rep.count("crash_states") as f64;
    rep.set("crash_states_per_s", Value::Float(states / cfg.seconds.max(0.001)));
    rep
}
