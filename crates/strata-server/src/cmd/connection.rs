//! Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET, CLIENT.

use bytes::Bytes;

use super::{arg, is, wrong_args, Session, Shared, Unblock};
use crate::resp::Reply;

/// The Redis version we report (the protocol level we follow).
pub const REDIS_VERSION: &str = "7.0.0";

pub(crate) fn ping(_: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    if sess.proto == 2 && sess.subs.active() && args.len() <= 2 {
        // Subscribed RESP2 clients get PING's answer in message form.
        return Reply::Array(vec![
            Reply::bulk("pong"),
            Reply::bulk(args.get(1).map(|a| a.as_ref()).unwrap_or_default()),
        ]);
    }
    match args.len() {
        1 => Reply::Simple("PONG"),
        2 => Reply::bulk(arg(args, 1)),
        _ => wrong_args("ping"),
    }
}

pub(crate) fn echo(_: &Shared, _: &mut Session, args: &[Bytes]) -> Reply {
    Reply::bulk(arg(args, 1))
}

/// Whether `given` equals `secret`, in a time that does not depend on
/// where they first differ (as Redis compares passwords), so that timing
/// replies does not reveal a password's prefix.
fn same_secret(given: &[u8], secret: &[u8]) -> bool {
    let n = given.len().max(secret.len());
    let diff = (0..n).fold(given.len() ^ secret.len(), |acc, i| {
        let a = given.get(i).copied().unwrap_or(0);
        let b = secret.get(i).copied().unwrap_or(0);
        acc | usize::from(a ^ b)
    });
    std::hint::black_box(diff) == 0
}

/// Checks a password for `user`; marks the session authenticated.
fn check_auth(shared: &Shared, sess: &mut Session, user: &[u8], pass: &[u8]) -> Result<(), Reply> {
    let ok = match &*shared.requirepass.read() {
        // Without a password the default user accepts anything (Redis's `nopass`).
        None => user == b"default",
        Some(p) => user == b"default" && same_secret(pass, p),
    };
    if ok {
        sess.authed = true;
        Ok(())
    } else {
        Err(Reply::err("WRONGPASS invalid username-password pair or user is disabled."))
    }
}

pub(crate) fn auth(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    let (user, pass) = match args.len() {
        2 => (&b"default"[..], arg(args, 1)),
        3 => (arg(args, 1), arg(args, 2)),
        _ => return Reply::err("ERR syntax error"),
    };
    if !shared.has_password() && args.len() == 2 {
        return Reply::err(
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        );
    }
    match check_auth(shared, sess, user, pass) {
        Ok(()) => Reply::ok(),
        Err(e) => e,
    }
}

pub(crate) fn hello(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    let mut proto = sess.proto;
    if args.len() >= 2 {
        match crate::numbers::parse_i64(arg(args, 1)) {
            None => return Reply::err("ERR Protocol version is not an integer or out of range"),
            Some(2) => proto = 2,
            Some(3) => proto = 3,
            Some(_) => return Reply::err("NOPROTO unsupported protocol version"),
        }
    }
    let mut i = 2;
    let mut auth: Option<(&[u8], &[u8])> = None;
    let mut setname: Option<&[u8]> = None;
    while i < args.len() {
        let opt = arg(args, i);
        if is(opt, "auth") && i + 2 < args.len() {
            auth = Some((arg(args, i + 1), arg(args, i + 2)));
            i += 3;
        } else if is(opt, "setname") && i + 1 < args.len() {
            setname = Some(arg(args, i + 1));
            i += 2;
        } else {
            return Reply::err(format!("ERR Syntax error in HELLO option '{}'", String::from_utf8_lossy(opt)));
        }
    }
    if let Some((u, p)) = auth {
        if let Err(e) = check_auth(shared, sess, u, p) {
            return e;
        }
    }
    if !sess.authed {
        return Reply::err(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH \
             <user> <pass> option can be used to authenticate the client and select the RESP protocol \
             version at the same time",
        );
    }
    if let Some(n) = setname {
        if let Err(e) = set_name(sess, n) {
            return e;
        }
    }
    sess.proto = proto;
    Reply::Map(vec![
        (Reply::bulk("server"), Reply::bulk("redis")),
        (Reply::bulk("version"), Reply::bulk(REDIS_VERSION)),
        (Reply::bulk("proto"), Reply::Int(i64::from(proto))),
        (Reply::bulk("id"), Reply::Int(sess.id as i64)),
        (Reply::bulk("mode"), Reply::bulk("standalone")),
        (Reply::bulk("role"), Reply::bulk("master")),
        (Reply::bulk("modules"), Reply::Array(Vec::new())),
    ])
}

/// SELECT n: later commands of the connection act on database n.
pub(crate) fn select(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    match db_index(shared, arg(args, 1)) {
        Ok(n) => {
            sess.db = n;
            Reply::ok()
        }
        Err(e) => Reply::err(e),
    }
}

/// A database index argument (SELECT, MOVE, COPY ... DB), or Redis's
/// error text: the index is a 32-bit integer, then checked against
/// `databases`.
pub(crate) fn db_index(shared: &Shared, a: &[u8]) -> Result<usize, &'static str> {
    match crate::numbers::parse_i64(a).and_then(|n| i32::try_from(n).ok()) {
        None => Err("ERR value is not an integer or out of range"),
        Some(n) => usize::try_from(n).ok().filter(|&n| n < shared.dbs.len()).ok_or("ERR DB index is out of range"),
    }
}

pub(crate) fn quit(_: &Shared, sess: &mut Session, _: &[Bytes]) -> Reply {
    sess.quit = true;
    Reply::ok()
}

pub(crate) fn reset(shared: &Shared, sess: &mut Session, _: &[Bytes]) -> Reply {
    sess.multi = None;
    sess.multi_failed = false;
    sess.unwatch();
    sess.proto = 2;
    sess.name = None;
    sess.db = 0;
    sess.authed = !shared.has_password();
    sess.reply_off = false;
    sess.reply_skip = 0;
    super::leave_all(shared, sess);
    Reply::Simple("RESET")
}

fn set_name(sess: &mut Session, name: &[u8]) -> Result<(), Reply> {
    if name.iter().any(|&c| c <= b' ' || c > b'~') {
        return Err(Reply::err("ERR Client names cannot contain spaces, newlines or special characters."));
    }
    sess.name = if name.is_empty() { None } else { Some(Bytes::copy_from_slice(name)) };
    Ok(())
}

fn client_line(sess: &Session) -> String {
    let (sub, psub, ssub) = sess.subs.sizes();
    format!(
        "id={} addr={} name={} db={} sub={sub} psub={psub} ssub={ssub} resp={} lib-name={} lib-ver={}\n",
        sess.id,
        sess.addr,
        sess.name.as_deref().map(String::from_utf8_lossy).unwrap_or_default(),
        sess.db,
        sess.proto,
        sess.lib.0.as_deref().unwrap_or(""),
        sess.lib.1.as_deref().unwrap_or("")
    )
}

/// Which client types a CLIENT KILL `TYPE` names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KillType {
    Normal,
    Pubsub,
    Master,
    Replica,
}

/// CLIENT KILL, both forms, with Redis's argument checks. There is no
/// registry of the other client connections yet, so of them only the
/// calling connection can match (with `SKIPME no`, or the old `ip:port`
/// form naming it; it is closed once the reply is written); the
/// replication links match too: the connection to our primary (`TYPE
/// master`, its address the primary's) and our replicas' (`TYPE replica`).
/// Sentinel's `CLIENT KILL TYPE normal` at a failover kills nothing here.
fn client_kill(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    use crate::replication::LinkKind;
    if args.len() == 3 {
        // The old form: CLIENT KILL ip:port.
        let addr = arg(args, 2);
        if addr == sess.addr.as_bytes() {
            sess.quit = true;
            return Reply::ok();
        }
        if shared.replication.kill_links(&|_, a| a.as_bytes() == addr) > 0 {
            return Reply::ok();
        }
        return Reply::err("ERR No such client");
    }
    let filters = args.get(2..).unwrap_or_default();
    if filters.len() % 2 != 0 {
        return Reply::err("ERR syntax error");
    }
    let mut skip_me = true;
    let mut kind: Option<KillType> = None;
    let mut addr: Option<&[u8]> = None;
    // Filters a replication link cannot match (an id, a local address,
    // an age).
    let mut links_match = true;
    let mut matches = true;
    for pair in filters.chunks(2) {
        let (name, value) = (arg(pair, 0), arg(pair, 1));
        if is(name, "type") {
            kind = Some(if is(value, "normal") {
                KillType::Normal
            } else if is(value, "pubsub") {
                KillType::Pubsub
            } else if is(value, "master") {
                KillType::Master
            } else if is(value, "slave") || is(value, "replica") {
                KillType::Replica
            } else {
                return Reply::err(format!("ERR Unknown client type '{}'", String::from_utf8_lossy(value)));
            });
        } else if is(name, "id") {
            match crate::numbers::parse_i64(value) {
                Some(id) if id > 0 => matches &= u64::try_from(id).is_ok_and(|id| id == sess.id),
                _ => return Reply::err("ERR client-id should be greater than 0"),
            }
            links_match = false;
        } else if is(name, "addr") {
            matches &= value == sess.addr.as_bytes();
            addr = Some(value);
        } else if is(name, "laddr") {
            matches = false;
            links_match = false;
        } else if is(name, "user") {
            matches &= value == b"default";
            links_match &= value == b"default";
        } else if is(name, "skipme") {
            skip_me = if is(value, "yes") {
                true
            } else if is(value, "no") {
                false
            } else {
                return Reply::err("ERR syntax error");
            };
        } else if is(name, "maxage") {
            if crate::numbers::parse_i64(value).is_none() {
                return Reply::err("ERR value is not an integer or out of range");
            }
            matches = false;
            links_match = false;
        } else {
            return Reply::err("ERR syntax error");
        }
    }
    let pubsub = sess.subs.sizes() != (0, 0, 0);
    matches &= match kind {
        None => true,
        Some(KillType::Normal) => !pubsub,
        Some(KillType::Pubsub) => pubsub,
        Some(KillType::Master | KillType::Replica) => false,
    };
    let mut killed = 0;
    if links_match {
        killed += shared.replication.kill_links(&|k, a| {
            let typed = match kind {
                None => true,
                Some(KillType::Master) => k == LinkKind::Master,
                Some(KillType::Replica) => k == LinkKind::Replica,
                Some(KillType::Normal | KillType::Pubsub) => false,
            };
            typed && addr.is_none_or(|want| want == a.as_bytes())
        });
    }
    if matches && !skip_me {
        sess.quit = true;
        killed += 1;
    }
    Reply::Int(killed as i64)
}

pub(crate) fn client(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    let sub = String::from_utf8_lossy(arg(args, 1)).to_ascii_lowercase();
    let n = args.len();
    let wrong = |s: &str| wrong_args(&format!("client|{s}"));
    match sub.as_str() {
        "setinfo" => {
            if n != 4 {
                return wrong("setinfo");
            }
            let attr = arg(args, 2);
            let value = String::from_utf8_lossy(arg(args, 3)).into_owned();
            if value.chars().any(|c| c == ' ' || c == '\n') {
                return Reply::err(format!(
                    "ERR {} cannot contain spaces, newlines or special characters.",
                    String::from_utf8_lossy(attr)
                ));
            }
            if is(attr, "lib-name") {
                sess.lib.0 = Some(value);
            } else if is(attr, "lib-ver") {
                sess.lib.1 = Some(value);
            } else {
                return Reply::err(format!("ERR Unrecognized option '{}'", String::from_utf8_lossy(attr)));
            }
            Reply::ok()
        }
        "setname" => {
            if n != 3 {
                return wrong("setname");
            }
            match set_name(sess, arg(args, 2)) {
                Ok(()) => Reply::ok(),
                Err(e) => e,
            }
        }
        "getname" if n == 2 => sess.name.clone().map(Reply::Bulk).unwrap_or(Reply::Nil),
        "id" if n == 2 => Reply::Int(sess.id as i64),
        "info" if n == 2 => Reply::bulk(client_line(sess)),
        "list" => Reply::bulk(client_line(sess)),
        "no-evict" | "no-touch" if n == 3 => Reply::ok(),
        "kill" if n >= 3 => client_kill(shared, sess, args),
        "unblock" if n == 3 || n == 4 => {
            let Some(id) = crate::numbers::parse_i64(arg(args, 2)) else {
                return Reply::err("ERR value is not an integer or out of range");
            };
            let how = match args.get(3) {
                None => Unblock::Timeout,
                Some(m) if is(m, "timeout") => Unblock::Timeout,
                Some(m) if is(m, "error") => Unblock::Error,
                Some(_) => return Reply::err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
            };
            // Client ids start at 1: a negative one names no client.
            Reply::Int(i64::from(u64::try_from(id).is_ok_and(|id| shared.waiting.request(id, how))))
        }
        "reply" if n == 3 => {
            let mode = arg(args, 2);
            if is(mode, "on") {
                sess.reply_off = false;
                sess.reply_skip = 0;
            } else if is(mode, "off") {
                sess.reply_off = true;
            } else if is(mode, "skip") {
                // This command's reply and the next one's.
                sess.reply_skip = 2;
            } else {
                return Reply::err("ERR syntax error");
            }
            Reply::ok()
        }
        "getname" | "id" | "info" | "kill" | "no-evict" | "no-touch" | "reply" | "unblock" => wrong(&sub),
        _ => {
            Reply::err(format!("ERR unknown subcommand '{}'. Try CLIENT HELP.", String::from_utf8_lossy(arg(args, 1))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::same_secret;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc\0def", b"abc\0def"));
        assert!(same_secret(b"", b""));
        for (a, b) in [(&b"abc"[..], &b"abd"[..]), (b"abc", b"ab"), (b"ab", b"abc"), (b"", b"x"), (b"\0", b"")] {
            assert!(!same_secret(a, b), "{a:?} {b:?}");
        }
    }
}
