//! Pub/sub delivery: which connections listen to which channels and
//! patterns, and a mailbox per connection that publishers on any thread
//! append to. The event loop that owns a subscriber is woken (once per
//! loop until it has looked) and moves the mail into the connection's
//! output itself: no thread waits per subscriber, and a slow subscriber
//! never blocks a publisher (its mailbox is bounded; past the bound the
//! subscriber is disconnected, as Redis's `client-output-buffer-limit
//! pubsub` hard limit does).

pub mod events;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use ahash::AHashMap;
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

use crate::glob::glob_match;
use crate::resp::Reply;

/// Pending pub/sub bytes (mailbox plus unsent output) above which a
/// subscriber is disconnected: Redis's default hard limit for pub/sub
/// clients (32 MB).
pub const OUTPUT_LIMIT: usize = 32 << 20;

/// One event loop's list of connections with new mail, and its waker.
pub struct LoopMail {
    waker: Arc<mio::Waker>,
    ready: Mutex<Vec<usize>>,
}

impl LoopMail {
    /// The mail list of the loop woken by `waker`.
    pub fn new(waker: Arc<mio::Waker>) -> Arc<LoopMail> {
        Arc::new(LoopMail { waker, ready: Mutex::new(Vec::new()) })
    }

    /// Lists connection `token` and wakes the loop if the list was empty
    /// (a non-empty list means a wake is already on its way).
    fn list(&self, token: usize) {
        let mut ready = self.ready.lock();
        let wake = ready.is_empty();
        ready.push(token);
        drop(ready);
        if wake {
            let _ = self.waker.wake();
        }
    }

    /// Takes the tokens of the connections with new mail.
    pub fn take(&self) -> Vec<usize> {
        std::mem::take(&mut *self.ready.lock())
    }
}

/// What a subscription is to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE: one channel.
    Channel,
    /// PSUBSCRIBE: channels matching a glob pattern.
    Pattern,
    /// SSUBSCRIBE: a shard channel (one shard here).
    Shard,
}

/// One message on its way to one subscriber.
#[derive(Clone, Debug)]
struct Msg {
    /// The pattern it matched (pattern subscriptions).
    pattern: Option<Bytes>,
    channel: Bytes,
    payload: Bytes,
    shard: bool,
}

impl Msg {
    fn size(&self) -> usize {
        self.pattern.as_ref().map_or(0, Bytes::len) + self.channel.len() + self.payload.len() + 48
    }

    fn reply(&self) -> Reply {
        let mut items = Vec::with_capacity(4);
        match &self.pattern {
            Some(p) => {
                items.push(Reply::bulk("pmessage"));
                items.push(Reply::Bulk(p.clone()));
            }
            None => items.push(Reply::bulk(if self.shard { "smessage" } else { "message" })),
        }
        items.push(Reply::Bulk(self.channel.clone()));
        items.push(Reply::Bulk(self.payload.clone()));
        Reply::Push(items)
    }
}

#[derive(Default)]
struct Inbox {
    msgs: VecDeque<Msg>,
    bytes: usize,
    /// Listed in the loop's mail list and not yet drained.
    listed: bool,
    /// The subscriber fell too far behind: it is to be disconnected.
    overflow: bool,
}

/// A connection's mailbox: publishers append, its event loop drains.
pub struct Mailbox {
    /// The connection's client id.
    id: u64,
    /// The connection's token on its loop.
    token: usize,
    home: Arc<LoopMail>,
    inbox: Mutex<Inbox>,
}

impl std::fmt::Debug for Mailbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mailbox({})", self.id)
    }
}

impl Mailbox {
    /// The mailbox of client `id`, connection `token` of the loop `home`.
    pub fn new(id: u64, token: usize, home: Arc<LoopMail>) -> Arc<Mailbox> {
        Arc::new(Mailbox { id, token, home, inbox: Mutex::new(Inbox::default()) })
    }

    fn post(&self, msg: Msg) {
        let mut inbox = self.inbox.lock();
        if inbox.overflow {
            return;
        }
        let size = msg.size();
        if inbox.bytes + size > OUTPUT_LIMIT {
            inbox.overflow = true;
            inbox.msgs.clear();
            inbox.bytes = 0;
        } else {
            inbox.bytes += size;
            inbox.msgs.push_back(msg);
        }
        if !inbox.listed {
            inbox.listed = true;
            drop(inbox);
            self.home.list(self.token);
        }
    }

    /// Lists the connection with its loop and wakes the loop, with no
    /// message: something else for it is ready (its script's reply).
    pub fn ring(&self) {
        self.home.list(self.token);
    }

    /// Appends the waiting messages to `out`, encoded for protocol
    /// `proto`; false if the subscriber overflowed and must be closed.
    pub fn drain(&self, proto: u8, out: &mut Vec<u8>) -> bool {
        let mut inbox = self.inbox.lock();
        inbox.listed = false;
        inbox.bytes = 0;
        for m in inbox.msgs.drain(..) {
            m.reply().encode(proto, out);
        }
        !inbox.overflow
    }
}

/// Every subscription of the server, and the keyspace notification
/// classes (CONFIG SET notify-keyspace-events).
#[derive(Default)]
pub struct Registry {
    subs: RwLock<Subs>,
    /// The enabled notification classes (see [`events`]).
    pub notify: AtomicU32,
}

type Subscribers = Vec<Arc<Mailbox>>;

#[derive(Default)]
struct Subs {
    channels: AHashMap<Bytes, Subscribers>,
    shard: AHashMap<Bytes, Subscribers>,
    /// Patterns in the order they were first subscribed.
    patterns: Vec<(Bytes, Subscribers)>,
}

impl Subs {
    fn list_mut(&mut self, kind: Kind, name: &Bytes) -> Option<&mut Subscribers> {
        match kind {
            Kind::Channel => self.channels.get_mut(name),
            Kind::Shard => self.shard.get_mut(name),
            Kind::Pattern => self.patterns.iter_mut().find(|(p, _)| p == name).map(|(_, s)| s),
        }
    }
}

impl Registry {
    /// Adds `mb` to the subscribers of `name` (the caller checked that it
    /// was not one yet).
    pub fn subscribe(&self, kind: Kind, name: Bytes, mb: &Arc<Mailbox>) {
        let mut subs = self.subs.write();
        if let Some(list) = subs.list_mut(kind, &name) {
            list.push(mb.clone());
            return;
        }
        match kind {
            Kind::Channel => drop(subs.channels.insert(name, vec![mb.clone()])),
            Kind::Shard => drop(subs.shard.insert(name, vec![mb.clone()])),
            Kind::Pattern => subs.patterns.push((name, vec![mb.clone()])),
        }
    }

    /// Removes client `id` from the subscribers of `name`.
    pub fn unsubscribe(&self, kind: Kind, name: &Bytes, id: u64) {
        let mut subs = self.subs.write();
        let empty = match subs.list_mut(kind, name) {
            Some(list) => {
                list.retain(|m| m.id != id);
                list.is_empty()
            }
            None => false,
        };
        if empty {
            match kind {
                Kind::Channel => drop(subs.channels.remove(name)),
                Kind::Shard => drop(subs.shard.remove(name)),
                Kind::Pattern => subs.patterns.retain(|(p, _)| p != name),
            }
        }
    }

    /// Delivers `payload` to the subscribers of `channel` (and, unless
    /// `shard`, of the patterns matching it); returns how many received it.
    /// Every message is appended under the registry's read lock, so one
    /// publisher's messages reach each subscriber in publish order.
    pub fn publish(&self, channel: &[u8], payload: &[u8], shard: bool) -> usize {
        let subs = self.subs.read();
        let channel = Bytes::copy_from_slice(channel);
        let payload = Bytes::copy_from_slice(payload);
        let mut n = 0;
        let direct = if shard { subs.shard.get(&channel) } else { subs.channels.get(&channel) };
        for mb in direct.into_iter().flatten() {
            mb.post(Msg { pattern: None, channel: channel.clone(), payload: payload.clone(), shard });
            n += 1;
        }
        if !shard {
            for (pattern, list) in &subs.patterns {
                if !glob_match(pattern, &channel) {
                    continue;
                }
                for mb in list {
                    let pattern = Some(pattern.clone());
                    mb.post(Msg { pattern, channel: channel.clone(), payload: payload.clone(), shard });
                    n += 1;
                }
            }
        }
        n
    }

    /// Channels (or shard channels) with subscribers, matching `pattern`.
    pub fn channels(&self, shard: bool, pattern: Option<&[u8]>) -> Vec<Bytes> {
        let subs = self.subs.read();
        let map = if shard { &subs.shard } else { &subs.channels };
        map.keys().filter(|c| pattern.is_none_or(|p| glob_match(p, c))).cloned().collect()
    }

    /// Subscribers of a channel (or shard channel).
    pub fn numsub(&self, shard: bool, channel: &[u8]) -> usize {
        let subs = self.subs.read();
        let map = if shard { &subs.shard } else { &subs.channels };
        map.get(channel).map_or(0, Vec::len)
    }

    /// Patterns with subscribers (PUBSUB NUMPAT).
    pub fn numpat(&self) -> usize {
        self.subs.read().patterns.len()
    }

    /// Channels, patterns and shard channels with subscribers (INFO).
    pub fn counts(&self) -> (usize, usize, usize) {
        let subs = self.subs.read();
        (subs.channels.len(), subs.patterns.len(), subs.shard.len())
    }

    /// The enabled keyspace notification classes.
    pub fn notify_flags(&self) -> u32 {
        self.notify.load(Ordering::Relaxed)
    }
}
