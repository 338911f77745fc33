//! `Options::background_nice`: the engine's background threads run at the
//! nice value asked for (Linux keeps one per thread), except the prefault
//! thread, which writers wait for. Its own test binary,
//! so no other test's database threads are in the process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[cfg(target_os = "linux")]
fn background_nice_values() -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").unwrap() {
        let t = t.unwrap().path();
        let comm = std::fs::read_to_string(t.join("comm")).unwrap_or_default().trim().to_string();
        if !comm.starts_with("strata-") {
            continue;
        }
        // Field 19 of stat is the nice value; the name (field 2) may hold
        // spaces, so count from the closing parenthesis.
        let stat = std::fs::read_to_string(t.join("stat")).unwrap();
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let nice: i64 = rest.split(' ').nth(16).unwrap().parse().unwrap();
        out.push((comm, nice));
    }
    out.sort();
    out
}

/// The nice value a thread named `comm` should have: the prefault thread
/// stays at the writers' priority, since writers wait for it.
#[cfg(target_os = "linux")]
fn expected(comm: &str, nice: i64) -> i64 {
    if comm == "strata-prefault" {
        0
    } else {
        nice
    }
}

#[cfg(target_os = "linux")]
#[test]
fn background_threads_run_at_the_nice_value_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = stratakv::Options::for_tests();
    o.background_nice = 7;
    let db = stratakv::Db::open(dir.path(), o).unwrap();
    // A thread names itself and sets its nice value as it starts: wait
    // for that, a while, for the first thread started and the last.
    let started = |threads: &[(String, i64)]| {
        ["strata-flush", "strata-prefault"].iter().all(|name| threads.iter().any(|(c, _)| c == name))
    };
    let mut threads = background_nice_values();
    for _ in 0..200 {
        if started(&threads) && threads.iter().all(|(c, n)| *n == expected(c, 7)) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        threads = background_nice_values();
    }
    assert!(threads.iter().any(|(c, _)| c == "strata-flush"), "{threads:?}");
    assert!(threads.iter().all(|(c, n)| *n == expected(c, 7)), "{threads:?}");
    assert!(threads.iter().any(|(c, n)| c == "strata-prefault" && *n == 0), "{threads:?}");
    db.put(b"k", b"v").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    db.close().unwrap();

    // 0 leaves them at the process's own priority.
    let o = stratakv::Options { background_nice: 0, ..stratakv::Options::for_tests() };
    let db = stratakv::Db::open(dir.path(), o).unwrap();
    let mut threads = background_nice_values();
    for _ in 0..200 {
        if threads.iter().any(|(c, _)| c == "strata-flush") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        threads = background_nice_values();
    }
    assert!(!threads.is_empty() && threads.iter().all(|(_, n)| *n == 0), "{threads:?}");
    db.close().unwrap();

    let o = stratakv::Options { background_nice: 20, ..stratakv::Options::for_tests() };
    assert!(o.validate().is_err());
    assert_eq!(stratakv::Options::default().background_nice, 10, "the default, as the server's");
}
