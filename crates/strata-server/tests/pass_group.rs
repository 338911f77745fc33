//! Many clients at once: the event loop runs the leading keyspace commands
//! of every connection of a pass as one group (one transaction, one engine
//! batch). Counters incremented by every client must hand out each value
//! exactly once, every client must read its own writes in order, and a
//! client whose write the engine refuses must fail alone — with and
//! without `--durability sync`, with the pass's replies sent in one
//! io_uring submission or one `write` each, and across a restart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};

use common::{connect, req, start};

fn read_reply_line(r: &mut BufReader<std::net::TcpStream>) -> String {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    line
}

fn run_clients(port: u16, clients: usize, rounds: usize) -> Vec<Vec<i64>> {
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            std::thread::spawn(move || {
                let mut s = connect(port);
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut got: Vec<Vec<i64>> = vec![Vec::new(); 3];
                for round in 0..rounds {
                    // A pipeline: three INCRs of shared counters, a write and
                    // a read of this client's own key, and (sometimes) a
                    // write the engine refuses, which must fail alone.
                    let mine = format!("own-{c}");
                    let value = format!("{c}-{round}");
                    let mut p = Vec::new();
                    for n in 0..3 {
                        p.extend(req(&["INCR", &format!("counter{n}")]));
                    }
                    p.extend(req(&["SET", &mine, &value]));
                    p.extend(req(&["GET", &mine]));
                    let refused = round % 7 == c % 7;
                    if refused {
                        p.extend(req(&["SET", &"k".repeat(70_000), "x"]));
                    }
                    p.extend(req(&["HSET", &format!("h{}", c % 2), &mine, &value]));
                    s.write_all(&p).unwrap();
                    for counter in got.iter_mut() {
                        let line = read_reply_line(&mut r);
                        counter.push(line.trim_end().strip_prefix(':').expect(&line).parse().unwrap());
                    }
                    assert_eq!(read_reply_line(&mut r), "+OK\r\n");
                    assert_eq!(read_reply_line(&mut r), format!("${}\r\n", value.len()));
                    assert_eq!(read_reply_line(&mut r), format!("{value}\r\n"), "client {c} reads its own write");
                    if refused {
                        let line = read_reply_line(&mut r);
                        assert!(line.starts_with("-ERR invalid argument: key of"), "{line}");
                    }
                    let line = read_reply_line(&mut r);
                    assert!(line == ":1\r\n" || line == ":0\r\n", "{line}");
                }
                got
            })
        })
        .collect();
    let mut per_counter = vec![Vec::new(); 3];
    for h in handles {
        for (n, vals) in h.join().unwrap().into_iter().enumerate() {
            per_counter[n].extend(vals);
        }
    }
    per_counter
}

fn check_counters(per_counter: &[Vec<i64>], from: i64, count: i64) {
    for (n, vals) in per_counter.iter().enumerate() {
        let set: BTreeSet<i64> = vals.iter().copied().collect();
        assert_eq!(set.len(), vals.len(), "counter{n}: a value handed out twice");
        assert_eq!(set, (from + 1..=from + count).collect(), "counter{n}: every increment exactly once");
    }
}

fn counters_survive(extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (clients, rounds) = (12, 40);
    {
        let srv = start(dir.path(), extra);
        check_counters(&run_clients(srv.port, clients, rounds), 0, (clients * rounds) as i64);
        let mut s = connect(srv.port);
        let grouped: u64 = common::info_field(&mut s, "stats", "pass_grouped_commands").parse().unwrap();
        assert!(grouped > 0, "passes ran several clients' commands as one group");
        s.write_all(b"SHUTDOWN\r\n").unwrap();
        let mut srv = srv;
        common::wait_exit(&mut srv);
    }
    let srv = start(dir.path(), extra);
    let mut s = connect(srv.port);
    let n = (clients * rounds).to_string();
    let want = format!("${}\r\n{n}\r\n", n.len());
    common::roundtrip(&mut s, b"GET counter0\r\n", want.as_bytes());
    common::roundtrip(&mut s, b"HLEN h0\r\nHLEN h1\r\n", b":6\r\n:6\r\n");
    check_counters(&run_clients(srv.port, clients, 5), (clients * rounds) as i64, (clients * 5) as i64);
}

#[test]
fn many_clients_share_passes_without_losing_or_repeating_an_increment() {
    counters_survive(&[]);
}

#[test]
fn many_durable_clients_share_passes_without_losing_or_repeating_an_increment() {
    counters_survive(&["--durability", "sync"]);
}

#[test]
fn many_clients_share_passes_with_one_write_each_instead_of_one_submission() {
    counters_survive(&["--io-uring", "no"]);
}
