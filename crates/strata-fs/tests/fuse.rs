//! The FUSE mount: `mkdir -p`, `ls`, `find`, `mv`, `rm -r` and file
//! contents through the kernel. Skipped, with a message, where this
//! machine cannot mount FUSE (no /dev/fuse, no CAP_SYS_ADMIN).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use strata_fs::ClientOptions;

fn sh(dir: &std::path::Path, cmd: &str) -> (bool, String) {
    let out = Command::new("sh").arg("-c").arg(cmd).current_dir(dir).output().unwrap();
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), s)
}

#[test]
fn shell_tools_work_on_the_mount() {
    let (d, c) = common::cluster(2);
    let mnt = d.path().join("mnt");
    let data = d.path().join("data");
    std::fs::create_dir_all(&mnt).unwrap();
    let session = match strata_fs::fuse::spawn(c.client(ClientOptions::default()), &mnt, &data) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("SKIPPED: cannot mount FUSE here ({e}); the FUSE test did not run");
            return;
        }
    };
    let ok = |cmd: &str| {
        let (ok, out) = sh(d.path(), cmd);
        assert!(ok, "{cmd}: {out}");
        out
    };
    ok("mkdir -p mnt/a/b/c mnt/a/d");
    ok("touch mnt/a/b/f && echo hello > mnt/a/b/g");
    assert_eq!(ok("ls mnt/a/b"), "c\nf\ng\n");
    assert_eq!(ok("cat mnt/a/b/g"), "hello\n");
    assert_eq!(ok("find mnt | sort"), "mnt\nmnt/a\nmnt/a/b\nmnt/a/b/c\nmnt/a/b/f\nmnt/a/b/g\nmnt/a/d\n");
    ok("mv mnt/a/b mnt/a/d/");
    ok("mv mnt/a/d/b/g mnt/h");
    assert_eq!(ok("cat mnt/h"), "hello\n");
    assert_eq!(ok("find mnt -type f | sort"), "mnt/a/d/b/f\nmnt/h\n");
    assert!(!sh(d.path(), "rmdir mnt/a").0); // not empty
    ok("rm -r mnt/a");
    assert_eq!(ok("ls mnt"), "h\n");
    // what the mount did is what the service holds
    let fs = c.client(ClientOptions::default());
    assert_eq!(fs.readdir("/").unwrap().len(), 1);
    drop(session);
}
