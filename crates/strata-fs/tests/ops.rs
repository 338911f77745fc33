//! Namespace operations against real server processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use strata_fs::check::check;
use strata_fs::rpc::Peers;
use strata_fs::types::{Cred, Kind};
use strata_fs::{ClientOptions, FsError};

fn peers(c: &strata_fs::cluster::LocalCluster) -> Peers {
    Peers::new(c.config.addrs(), std::time::Duration::from_secs(10))
}

#[test]
fn posix_semantics_on_three_servers() {
    let (_d, c) = common::cluster(3);
    let fs = c.client(ClientOptions::default());
    fs.mkdir("/a", 0o755).unwrap();
    assert_eq!(fs.mkdir("/a", 0o755), Err(FsError::Exists));
    fs.mkdir_p("/a/b/c/d", 0o755).unwrap();
    fs.create("/a/b/f", 0o644).unwrap();
    assert_eq!(fs.create("/a/b/f", 0o644).map(|_| ()), Err(FsError::Exists));
    assert_eq!(fs.create("/nope/f", 0o644).map(|_| ()), Err(FsError::NotFound));
    assert_eq!(fs.create("/a/b/f/g", 0o644).map(|_| ()), Err(FsError::NotDir));
    assert_eq!(fs.stat("/a/b/f").unwrap().kind, Kind::File);
    assert_eq!(fs.stat("/a/b/c").unwrap().kind, Kind::Dir);
    assert_eq!(fs.lookup("/a/b/c").unwrap().id, strata_fs::ids::dir_id(fs.lookup("/a/b").unwrap().id, "c", 0));
    assert_eq!(fs.rmdir("/a/b"), Err(FsError::NotEmpty));
    assert_eq!(fs.rmdir("/a/b/f"), Err(FsError::NotDir));
    assert_eq!(fs.unlink("/a/b/c"), Err(FsError::IsDir));
    // readdir, paged
    for i in 0..25 {
        fs.create(&format!("/a/b/c/f{i:02}"), 0o644).unwrap();
    }
    let (p1, next) = fs.readdir_page("/a/b/c", None, 10).unwrap();
    assert_eq!(p1.len(), 10);
    let (p2, _) = fs.readdir_page("/a/b/c", next.as_deref(), 10).unwrap();
    assert_eq!(p2[0].name, "f09");
    assert_eq!(fs.readdir("/a/b/c").unwrap().len(), 26);
    // renames: file local / cross-server, directory, loop check
    fs.rename("/a/b/f", "/a/b/g").unwrap();
    assert_eq!(fs.stat("/a/b/f"), Err(FsError::NotFound));
    fs.rename("/a/b/g", "/a/b/c/d/g").unwrap();
    assert_eq!(fs.stat("/a/b/c/d/g").unwrap().kind, Kind::File);
    assert!(matches!(fs.rename("/a/b", "/a/b/c/d/x"), Err(FsError::Invalid(_))));
    fs.rename("/a/b/c", "/c2").unwrap();
    assert_eq!(fs.stat("/a/b/c"), Err(FsError::NotFound));
    assert_eq!(fs.stat("/c2/d/g").unwrap().kind, Kind::File);
    assert_eq!(fs.readdir("/c2").unwrap().len(), 26);
    // a new /a/b/c gets the next version (its first name moved away)
    fs.mkdir("/a/b/c", 0o755).unwrap();
    assert_ne!(fs.stat("/a/b/c").unwrap().id, fs.stat("/c2").unwrap().id);
    // rm -r
    fs.remove_all("/c2").unwrap();
    assert_eq!(fs.stat("/c2"), Err(FsError::NotFound));
    let rep = check(&peers(&c)).unwrap();
    assert!(rep.violations.is_empty(), "{:?}", rep.violations);
    assert!(rep.tree.contains_key("/a/b/c"));
}

/// rename onto an existing directory replaces it when it is empty (POSIX),
/// refuses it (ENOTEMPTY) when it is not, and leaves a sound tree either way;
/// a new directory under the replaced one's birth name gets a fresh id.
#[test]
fn rename_replaces_an_empty_directory() {
    let (_d, c) = common::cluster(3);
    let fs = c.client(ClientOptions::default());
    for d in ["/src/inner", "/empty", "/full/x", "/p/q"] {
        fs.mkdir_p(d, 0o755).unwrap();
    }
    fs.create("/src/inner/f", 0o644).unwrap();
    let moved = fs.stat("/src").unwrap().id;
    let replaced = fs.stat("/empty").unwrap().id;
    assert_eq!(fs.rename("/src", "/full"), Err(FsError::NotEmpty));
    assert_eq!(fs.stat("/full/x").unwrap().kind, Kind::Dir, "a refused rename changes nothing");
    fs.create("/full/x/g", 0o644).unwrap();
    fs.rename("/src", "/empty").unwrap();
    assert_eq!(fs.stat("/src"), Err(FsError::NotFound));
    assert_eq!(fs.stat("/empty").unwrap().id, moved, "the moved directory keeps its id");
    assert_eq!(fs.stat("/empty/inner/f").unwrap().kind, Kind::File);
    fs.create("/empty/h", 0o644).unwrap();
    // The replaced directory is gone on every server; its name is free.
    let rep = check(&peers(&c)).unwrap();
    assert!(rep.violations.is_empty(), "{:?}", rep.violations);
    fs.mkdir("/src", 0o755).unwrap();
    assert_ne!(fs.stat("/src").unwrap().id, moved);
    assert_ne!(fs.stat("/src").unwrap().id, replaced);
    // A file onto a directory, a directory onto a file: refused as POSIX does.
    fs.create("/file", 0o644).unwrap();
    assert_eq!(fs.rename("/file", "/p"), Err(FsError::IsDir));
    assert_eq!(fs.rename("/p", "/file"), Err(FsError::NotDir));
    fs.rename("/p/q", "/src").unwrap();
    let rep = check(&peers(&c)).unwrap();
    assert!(rep.violations.is_empty(), "{:?}", rep.violations);
    assert!(rep.tree.contains_key("/src") && !rep.tree.contains_key("/p/q"));
}

#[test]
fn permissions_are_checked_during_resolution() {
    let (_d, c) = common::cluster(2);
    let root = c.client(ClientOptions::default());
    root.mkdir_p("/home/u", 0o755).unwrap();
    root.chown("/home/u", Some(1000), Some(1000)).unwrap();
    root.mkdir("/secret", 0o700).unwrap();
    root.mkdir("/secret/in", 0o777).unwrap();
    let user = c.client(ClientOptions { cred: Cred::user(1000, 1000), ..Default::default() });
    user.create("/home/u/f", 0o600).unwrap();
    assert_eq!(user.create("/home/g", 0o600).map(|_| ()), Err(FsError::Access));
    assert_eq!(user.stat("/secret/in").map(|_| ()), Err(FsError::Access));
    assert_eq!(user.create("/secret/in/x", 0o600).map(|_| ()), Err(FsError::Access));
    assert_eq!(user.chmod("/home", 0o777).map(|_| ()), Err(FsError::Perm));
    user.chmod("/home/u/f", 0o644).unwrap();
    // root opens /secret; the user's cached view is not needed to see it
    root.chmod("/secret", 0o755).unwrap();
    user.create("/secret/in/x", 0o600).unwrap();
    // and closing it again is seen through the user's cache (lazy invalidation)
    root.chmod("/secret", 0o700).unwrap();
    assert_eq!(user.create("/secret/in/y", 0o600).map(|_| ()), Err(FsError::Access));
    assert!(user.stale_retries() >= 1);
}

#[test]
fn speculative_resolution_takes_one_round() {
    let (_d, c) = common::cluster(3);
    let setup = c.client(ClientOptions::default());
    let deep: String = (0..10).map(|i| format!("/d{i}")).collect();
    setup.mkdir_p(&deep, 0o755).unwrap();
    setup.create(&format!("{deep}/f"), 0o644).unwrap();
    // cold, speculative: the whole depth-10 path (and the file) in one round
    let spec = c.client(ClientOptions { cache_capacity: 0, ..Default::default() });
    let r0 = spec.rounds();
    assert_eq!(spec.stat(&deep).unwrap().kind, Kind::Dir);
    assert_eq!(spec.rounds() - r0, 1);
    let r0 = spec.rounds();
    spec.stat(&format!("{deep}/f")).unwrap();
    assert_eq!(spec.rounds() - r0, 1);
    // step by step: one round per component
    let slow = c.client(ClientOptions { cache_capacity: 0, speculate: false, ..Default::default() });
    let r0 = slow.rounds();
    slow.stat(&deep).unwrap();
    assert_eq!(slow.rounds() - r0, 10);
    // after a rename, the mispredicted level costs one more round
    setup.rename("/d0/d1/d2/d3/d4", "/d0/d1/d2/d3/m4").unwrap();
    let moved = deep.replace("/d4", "/m4");
    let r0 = spec.rounds();
    spec.stat(&moved).unwrap();
    assert_eq!(spec.rounds() - r0, 2);
    // warm cache: stat of a file is one round
    let warm = c.client(ClientOptions::default());
    warm.stat(&moved).unwrap();
    let r0 = warm.rounds();
    warm.stat(&format!("{moved}/f")).unwrap();
    assert_eq!(warm.rounds() - r0, 1);
}

#[test]
fn stale_cache_is_refused_and_retried() {
    let (_d, c) = common::cluster(3);
    let a = c.client(ClientOptions::default());
    let b = c.client(ClientOptions::default());
    a.mkdir_p("/a/b", 0o755).unwrap();
    a.create("/a/b/f", 0o644).unwrap();
    assert_eq!(a.stat("/a/b/f").unwrap().kind, Kind::File);
    assert!(a.cached() >= 2);
    b.rename("/a", "/x").unwrap();
    assert_eq!(a.stat("/a/b/f"), Err(FsError::NotFound));
    assert_eq!(a.stat("/x/b/f").unwrap().kind, Kind::File);
    assert!(a.stale_retries() >= 1);
    // a create through the stale path fails too, and the new path works
    a.stat("/x/b").unwrap();
    b.rename("/x/b", "/x/c").unwrap();
    assert_eq!(a.create("/x/b/g", 0o644).map(|_| ()), Err(FsError::NotFound));
    a.create("/x/c/g", 0o644).unwrap();
    // rmdir is seen too
    b.unlink("/x/c/f").unwrap();
    b.unlink("/x/c/g").unwrap();
    b.rmdir("/x/c").unwrap();
    assert_eq!(a.create("/x/c/h", 0o644).map(|_| ()), Err(FsError::NotFound));
}

#[test]
fn concurrent_creates_rmdirs_and_crossing_renames_stay_sound() {
    let (_d, c) = common::cluster(3);
    let setup = c.client(ClientOptions::default());
    setup.mkdir_p("/r/d", 0o777).unwrap();
    setup.mkdir_p("/x", 0o777).unwrap();
    setup.mkdir_p("/y", 0o777).unwrap();
    std::thread::scope(|s| {
        let c = &c;
        s.spawn(move || {
            let fs = c.client(ClientOptions::default());
            for i in 0..400 {
                let _ = fs.create(&format!("/r/d/f{}", i % 7), 0o644);
                let _ = fs.unlink(&format!("/r/d/f{}", (i + 3) % 7));
            }
        });
        s.spawn(move || {
            let fs = c.client(ClientOptions::default());
            for _ in 0..200 {
                let _ = fs.rmdir("/r/d");
                let _ = fs.mkdir("/r/d", 0o777);
            }
        });
        // Two clients move /x under /y and /y under /x: never both.
        for (a, b) in [("x", "y"), ("y", "x")] {
            s.spawn(move || {
                let fs = c.client(ClientOptions::default());
                for _ in 0..100 {
                    let _ = fs.rename(&format!("/{a}"), &format!("/{b}/{a}"));
                    let _ = fs.rename(&format!("/{b}/{a}"), &format!("/{a}"));
                }
            });
        }
    });
    let rep = check(&peers(&c)).unwrap();
    assert!(rep.violations.is_empty(), "{:?}", rep.violations);
    assert!(rep.tree.keys().any(|p| p.ends_with("/x")) && rep.tree.keys().any(|p| p.ends_with("/y")));
}

#[test]
fn hostile_frames_do_not_take_a_server_down() {
    use std::io::Write;
    let (_d, c) = common::cluster(1);
    let addr = c.config.servers[0].addr.clone();
    let mut frames: Vec<Vec<u8>> = vec![
        vec![0xff, 0xff, 0xff, 0xff],                         // 4 GiB length
        vec![10, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10],     // garbage body
        vec![8, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f], // a vec of 2^31 requests
    ];
    // a deeply nested value cannot be expressed: batches do not nest
    frames.push(vec![5, 0, 0, 0, 1, 0, 0, 0, 9]);
    for f in frames {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        let _ = s.write_all(&f);
        drop(s);
    }
    let fs = c.client(ClientOptions::default());
    fs.mkdir("/still-here", 0o755).unwrap();
    assert_eq!(fs.stat("/still-here").unwrap().kind, Kind::Dir);
}

#[test]
fn invalidation_entries_are_pruned_after_the_cache_ttl() {
    let (_d, mut c) = common::cluster(2);
    c.set_inval_keep_secs(1).unwrap();
    let ttl = std::time::Duration::from_millis(300);
    let a = c.client(ClientOptions { cache_ttl: ttl, ..Default::default() });
    let b = c.client(ClientOptions::default());
    a.mkdir_p("/a/b", 0o755).unwrap();
    a.create("/a/b/f", 0o644).unwrap();
    a.stat("/a/b/f").unwrap();
    b.rename("/a", "/x").unwrap();
    let count = || {
        let p = peers(&c);
        (0..2)
            .map(|s| {
                match p.call(s, &strata_fs::proto::Request::Scan { prefix: b"I|".to_vec(), after: vec![], limit: 100 })
                {
                    Ok(strata_fs::proto::Response::Kvs(kvs)) => kvs.len(),
                    other => panic!("{other:?}"),
                }
            })
            .sum::<usize>()
    };
    assert_eq!(count(), 2); // the renamed directory, on both servers
    std::thread::sleep(std::time::Duration::from_millis(1800));
    assert_eq!(count(), 0);
    // the client's cached /a expired before the servers forgot
    assert_eq!(a.stat("/a/b/f"), Err(FsError::NotFound));
    assert_eq!(a.stat("/x/b/f").unwrap().kind, Kind::File);
}
