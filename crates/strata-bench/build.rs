//! Records how this binary and its engines were built, for the
//! `engine_version` and `engine_build` fields of the JSON report:
//!
//! * the profile and optimization level of strata-bench (and so of
//!   StrataKV and fjall, built with it);
//! * the versions of the engine crates, from the workspace's Cargo.lock;
//! * with the `rocksdb` feature: the RocksDB version librocksdb-sys bundles
//!   (its `version.h`) and the flags its build script compiled RocksDB with,
//!   read from that build script's output (cc logs each compiler command
//!   when built with `CC_ENABLE_DEBUG_OUTPUT=1`, as `bench/compare` does).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC_ENABLE_DEBUG_OUTPUT");
    let var = |k: &str| env::var(k).unwrap_or_default();

    // This crate's own build.
    let profile = var("PROFILE");
    let opt = var("OPT_LEVEL");
    let asserts = if env::var_os("CARGO_CFG_DEBUG_ASSERTIONS").is_some() {
        "debug assertions on"
    } else {
        "debug assertions off"
    };
    let rustflags = var("CARGO_ENCODED_RUSTFLAGS").replace('\x1f', " ");
    let mut own = format!("{profile} (rustc opt-level {opt}, {asserts}");
    if !rustflags.trim().is_empty() {
        own.push_str(&format!(", RUSTFLAGS {}", rustflags.trim()));
    }
    own.push(')');
    println!("cargo:rustc-env=STRATA_BENCH_BUILD={own}");

    // Crate versions from Cargo.lock (the workspace root is two levels up).
    let manifest = PathBuf::from(var("CARGO_MANIFEST_DIR"));
    let lock = manifest.join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let lock_text = fs::read_to_string(&lock).unwrap_or_default();
    for (krate, key) in [
        ("fjall", "FJALL"),
        ("lsm-tree", "LSM_TREE"),
        ("rocksdb", "ROCKSDB_CRATE"),
        ("librocksdb-sys", "LIBROCKSDB_SYS"),
    ] {
        let v = locked_version(&lock_text, krate).unwrap_or_else(|| "?".into());
        println!("cargo:rustc-env=STRATA_BENCH_{key}_VERSION={v}");
    }

    // RocksDB, when the feature links it: librocksdb-sys's `links = "rocksdb"`
    // metadata gives its source and output directories.
    let (mut rocks_version, mut rocks_flags) = (String::from("?"), String::from("unknown"));
    if env::var_os("CARGO_FEATURE_ROCKSDB").is_some() {
        if let Ok(src) = env::var("DEP_ROCKSDB_CARGO_MANIFEST_DIR") {
            let header = Path::new(&src).join("rocksdb/include/rocksdb/version.h");
            println!("cargo:rerun-if-changed={}", header.display());
            if let Some(v) = header_version(&fs::read_to_string(&header).unwrap_or_default()) {
                rocks_version = v;
            }
        }
        if let Ok(out) = env::var("DEP_ROCKSDB_OUT_DIR") {
            // <target>/build/librocksdb-sys-<hash>/out -> .../output
            let output = Path::new(&out).with_file_name("output");
            println!("cargo:rerun-if-changed={}", output.display());
            if let Some(flags) = compile_flags(&fs::read_to_string(&output).unwrap_or_default()) {
                rocks_flags = flags;
            }
        }
    }
    println!("cargo:rustc-env=STRATA_BENCH_ROCKSDB_VERSION={rocks_version}");
    println!("cargo:rustc-env=STRATA_BENCH_ROCKSDB_CFLAGS={rocks_flags}");
}

/// The version of `krate` in a Cargo.lock (the first entry of that name).
fn locked_version(lock: &str, krate: &str) -> Option<String> {
    let name_line = format!("name = \"{krate}\"");
    let mut lines = lock.lines();
    while let Some(l) = lines.next() {
        if l.trim() == name_line {
            let v = lines.next()?.trim().strip_prefix("version = \"")?.strip_suffix('"')?;
            return Some(v.to_string());
        }
    }
    None
}

/// "11.8.1" from RocksDB's version.h.
fn header_version(h: &str) -> Option<String> {
    let get =
        |k: &str| h.lines().find_map(|l| l.trim().strip_prefix(&format!("#define {k} ")).map(|v| v.trim().to_string()));
    Some(format!("{}.{}.{}", get("ROCKSDB_MAJOR")?, get("ROCKSDB_MINOR")?, get("ROCKSDB_PATCH")?))
}

/// The flags that decide RocksDB's speed (optimization, NDEBUG, target CPU,
/// debug info, language standard, and the two that let a batched MultiGet
/// read asynchronously with `async_io`: coroutines and io_uring) from the
/// first compiler command that compiled a RocksDB source file, as cc logged it.
fn compile_flags(output: &str) -> Option<String> {
    let cmd = output.lines().find(|l| l.starts_with("running:") && l.contains("rocksdb/db/"))?;
    let words: Vec<&str> = cmd.split_whitespace().map(|w| w.trim_matches('"')).filter(|w| !w.is_empty()).collect();
    let keep = |w: &str| {
        w.starts_with("-O")
            || w.starts_with("-DNDEBUG")
            || w.starts_with("-march")
            || w.starts_with("-mcpu")
            || w.starts_with("-msse4.2")
            || w.starts_with("-mavx2")
            || w.starts_with("-g")
            || w.starts_with("-std=")
            || w.starts_with("-flto")
            || w.starts_with("-DUSE_COROUTINES")
            || w.starts_with("-DROCKSDB_IOURING_PRESENT")
    };
    let family = |f: &str| {
        if f.starts_with("-march") {
            1
        } else if f.starts_with("-O") {
            2
        } else {
            0
        }
    };
    let mut flags: Vec<&str> = Vec::new();
    for w in words.iter().copied().filter(|w| keep(w)) {
        // The compiler obeys the last -march/-O (CXXFLAGS come after cc's own).
        if family(w) != 0 {
            flags.retain(|f| family(f) != family(w));
        }
        if !flags.contains(&w) {
            flags.push(w);
        }
    }
    let compiler = words.get(1).copied().unwrap_or("?");
    Some(format!("{} {}", compiler.rsplit('/').next().unwrap_or(compiler), flags.join(" ")))
}
