//! Pub/sub commands: (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PUBLISH, SPUBLISH,
//! PUBSUB. Delivery itself is `crate::pubsub`'s.

use ahash::AHashSet;
use bytes::Bytes;

use super::{arg, wrong_args, Session, Shared};
use crate::pubsub::Kind;
use crate::resp::Reply;

/// A connection's subscriptions.
#[derive(Debug, Default)]
pub struct Subscriptions {
    channels: AHashSet<Bytes>,
    patterns: AHashSet<Bytes>,
    shard: AHashSet<Bytes>,
}

impl Subscriptions {
    /// Channels plus patterns (the count SUBSCRIBE replies show).
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// Whether any subscription is held (shard channels included): the
    /// connection is in pub/sub mode.
    pub fn active(&self) -> bool {
        self.count() + self.shard.len() > 0
    }

    /// Channels, patterns, shard channels (CLIENT LIST's sub/psub/ssub).
    pub fn sizes(&self) -> (usize, usize, usize) {
        (self.channels.len(), self.patterns.len(), self.shard.len())
    }

    fn set(&mut self, kind: Kind) -> &mut AHashSet<Bytes> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    fn count_for(&self, kind: Kind) -> usize {
        if kind == Kind::Shard {
            self.shard.len()
        } else {
            self.count()
        }
    }
}

/// The error for a command a RESP2 client may not send while subscribed
/// (Redis 7's text, with the full name of a subcommand: `client|list`).
pub(crate) fn not_allowed(spec: &super::Spec, args: &[Bytes]) -> Reply {
    let name = match args.get(1) {
        Some(s) if !spec.subcommands.is_empty() => {
            format!("{}|{}", spec.name, String::from_utf8_lossy(s).to_ascii_lowercase())
        }
        _ => spec.name.to_string(),
    };
    Reply::err(format!(
        "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
    ))
}

fn confirm(what: &'static str, name: Option<Bytes>, count: usize) -> Reply {
    Reply::Push(vec![Reply::bulk(what), name.map_or(Reply::Nil, Reply::Bulk), Reply::Int(count as i64)])
}

fn add(shared: &Shared, sess: &mut Session, kind: Kind, what: &'static str, args: &[Bytes]) -> Reply {
    let Some(mb) = sess.mailbox.clone() else {
        return Reply::err("ERR this connection cannot subscribe");
    };
    let mut out = Vec::new();
    for name in args.iter().skip(1) {
        if sess.subs.set(kind).insert(name.clone()) {
            shared.pubsub.subscribe(kind, name.clone(), &mb);
        }
        out.push(confirm(what, Some(name.clone()), sess.subs.count_for(kind)));
    }
    Reply::Many(out)
}

fn remove(shared: &Shared, sess: &mut Session, kind: Kind, what: &'static str, args: &[Bytes]) -> Reply {
    let names: Vec<Bytes> = if args.len() > 1 {
        args.iter().skip(1).cloned().collect()
    } else {
        sess.subs.set(kind).iter().cloned().collect()
    };
    if names.is_empty() {
        return Reply::Many(vec![confirm(what, None, sess.subs.count_for(kind))]);
    }
    let mut out = Vec::new();
    for name in names {
        if sess.subs.set(kind).remove(&name) {
            shared.pubsub.unsubscribe(kind, &name, sess.id);
        }
        out.push(confirm(what, Some(name), sess.subs.count_for(kind)));
    }
    Reply::Many(out)
}

/// Drops every subscription of the connection (RESET, close).
pub fn leave_all(shared: &Shared, sess: &mut Session) {
    for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
        for name in std::mem::take(sess.subs.set(kind)) {
            shared.pubsub.unsubscribe(kind, &name, sess.id);
        }
    }
}

pub(crate) fn subscribe(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    add(shared, sess, Kind::Channel, "subscribe", args)
}

pub(crate) fn psubscribe(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    add(shared, sess, Kind::Pattern, "psubscribe", args)
}

pub(crate) fn ssubscribe(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    add(shared, sess, Kind::Shard, "ssubscribe", args)
}

pub(crate) fn unsubscribe(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    remove(shared, sess, Kind::Channel, "unsubscribe", args)
}

pub(crate) fn punsubscribe(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    remove(shared, sess, Kind::Pattern, "punsubscribe", args)
}

pub(crate) fn sunsubscribe(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    remove(shared, sess, Kind::Shard, "sunsubscribe", args)
}

pub(crate) fn publish(shared: &Shared, _: &mut Session, args: &[Bytes]) -> Reply {
    Reply::Int(shared.pubsub.publish(arg(args, 1), arg(args, 2), false) as i64)
}

pub(crate) fn spublish(shared: &Shared, _: &mut Session, args: &[Bytes]) -> Reply {
    Reply::Int(shared.pubsub.publish(arg(args, 1), arg(args, 2), true) as i64)
}

/// PUBSUB CHANNELS | NUMSUB | NUMPAT | SHARDCHANNELS | SHARDNUMSUB.
pub(crate) fn pubsub(shared: &Shared, _: &mut Session, args: &[Bytes]) -> Reply {
    let sub = String::from_utf8_lossy(arg(args, 1)).to_ascii_lowercase();
    let n = args.len();
    match sub.as_str() {
        "channels" | "shardchannels" if n <= 3 => {
            let pattern = args.get(2).map(|p| p.as_ref());
            let list = shared.pubsub.channels(sub == "shardchannels", pattern);
            Reply::Array(list.into_iter().map(Reply::Bulk).collect())
        }
        // A flat array in RESP3 too, as Redis 7.0 answers.
        "numsub" | "shardnumsub" => Reply::Array(
            args.iter()
                .skip(2)
                .flat_map(|c| {
                    [Reply::Bulk(c.clone()), Reply::Int(shared.pubsub.numsub(sub == "shardnumsub", c) as i64)]
                })
                .collect(),
        ),
        "numpat" if n == 2 => Reply::Int(shared.pubsub.numpat() as i64),
        "channels" | "shardchannels" | "numpat" => wrong_args(&format!("pubsub|{sub}")),
        _ => {
            Reply::err(format!("ERR unknown subcommand '{}'. Try PUBSUB HELP.", String::from_utf8_lossy(arg(args, 1))))
        }
    }
}
