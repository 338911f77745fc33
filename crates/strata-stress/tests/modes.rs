//! Each in-process mode runs for a few seconds without a violation.
//! (The kill mode needs the binary; `scripts/test.d/30-stress.sh` runs it.)
#![allow(clippy::unwrap_used)]

use strata_stress::{fs_fault, limits, model, pm_crash, RunCfg};

fn cfg(seconds: f64, seed: u64) -> RunCfg {
    RunCfg { seconds, seed, jobs: 2, verbose: false, shards: 0 }
}

#[test]
fn pm_crash_explores_crash_states_without_violations() {
    let r = pm_crash::run(&cfg(4.0, 11));
    println!("{}", r.json());
    assert_eq!(r.violations(), 0, "{}", r.json());
    assert!(r.count("crash_states") > 0, "{}", r.json());
}

#[test]
fn fs_fault_injects_faults_without_violations() {
    let r = fs_fault::run(&cfg(4.0, 12));
    println!("{}", r.json());
    assert_eq!(r.violations(), 0, "{}", r.json());
    assert!(r.count("faults_injected") > 0, "{}", r.json());
}

#[test]
fn model_agrees_with_the_btreemap() {
    let r = model::run(&cfg(4.0, 13));
    println!("{}", r.json());
    assert_eq!(r.violations(), 0, "{}", r.json());
    assert!(r.count("ops") > 0, "{}", r.json());
}

#[test]
fn limits_are_enforced() {
    let r = limits::run(&cfg(1.0, 14)).unwrap();
    println!("{}", r.json());
    assert_eq!(r.violations(), 0, "{}", r.json());
    assert!(r.count("over_limit_keys_refused") > 0, "{}", r.json());
}
