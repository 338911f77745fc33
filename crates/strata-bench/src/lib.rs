//! strata-bench: RocksDB `db_bench`'s workloads, flag names and result
//! lines for StrataKV, plus YCSB core workloads A–F.
//!
//! The same command line means the same work as db_bench 7.8.3: keys,
//! values and random streams are generated as db_bench generates them
//! ([`keygen`]); every workload talks to an [`engine::Engine`], so fjall
//! ([`fjall_engine`]) and, with the `rocksdb` feature, RocksDB (`rocks`,
//! built from its bundled sources) run through identical code paths.
//!
//! Modules: [`flags`] (command line), [`keygen`] (keys, values, random
//! numbers), [`workloads`] (db_bench workloads), [`ycsb`] and [`ycsb_ops`]
//! (YCSB generators, record layout, load and transaction phases),
//! [`keyspace`] (partitions, key ranges and the survivors of the deletehalf
//! benchmarks), [`measure`] (latency, timeline), [`report`] (text and JSON), [`runner`]
//! (the benchmark list), [`sysinfo`] (/proc), [`engine`] (the seam),
//! [`cpufloor`] (the machine's latency floor).

pub mod cpufloor;
pub mod engine;
pub mod engines;
pub mod fjall_engine;
pub mod flags;
pub mod keygen;
pub mod keyspace;
pub mod measure;
pub mod report;
#[cfg(feature = "rocksdb")]
pub mod rocks;
pub mod runner;
pub mod sharded_engine;
pub mod sysinfo;
pub mod workloads;
pub mod ycsb;
pub mod ycsb_ops;
