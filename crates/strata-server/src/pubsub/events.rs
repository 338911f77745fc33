//! Keyspace notifications: the classes of `notify-keyspace-events` (Redis's
//! letters) and the `__keyspace@db__:key` / `__keyevent@db__:event`
//! messages a write publishes.

use super::Registry;

/// `K`: publish on `__keyspace@<db>__:<key>`.
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>`.
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME, ...).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted set commands.
pub const ZSET: u32 = 1 << 7;
/// `x`: a key expired.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: a key was evicted.
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub const STREAM: u32 = 1 << 10;
/// `m`: a key was missed (not part of `A`).
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module events.
pub const MODULE: u32 = 1 << 12;
/// `n`: a key was created (not part of `A`).
pub const NEW: u32 = 1 << 13;
/// `A`: `g$lshzxetd`.
pub const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The class letters in Redis's output order (after `A`, before `K`/`E`/`m`).
const LETTERS: &[(u8, u32)] = &[
    (b'g', GENERIC),
    (b'$', STRING),
    (b'l', LIST),
    (b's', SET),
    (b'h', HASH),
    (b'z', ZSET),
    (b'x', EXPIRED),
    (b'e', EVICTED),
    (b't', STREAM),
    (b'd', MODULE),
    (b'n', NEW),
];

/// Parses a `notify-keyspace-events` value; `None` for an unknown letter.
pub fn parse(s: &[u8]) -> Option<u32> {
    let mut flags = 0;
    for &c in s {
        flags |= match c {
            b'A' => ALL,
            b'K' => KEYSPACE,
            b'E' => KEYEVENT,
            b'm' => KEY_MISS,
            _ => LETTERS.iter().find(|(l, _)| *l == c)?.1,
        };
    }
    Some(flags)
}

/// The canonical text of `flags`, as CONFIG GET shows it.
pub fn format(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    }
    for &(l, f) in LETTERS {
        if flags & f != 0 && (flags & ALL != ALL || f & ALL == 0) {
            s.push(char::from(l));
        }
    }
    for (l, f) in [('K', KEYSPACE), ('E', KEYEVENT), ('m', KEY_MISS)] {
        if flags & f != 0 {
            s.push(l);
        }
    }
    s
}

/// One keyspace event of a write, published once the write committed.
#[derive(Clone, Debug)]
pub struct KeyEvent {
    /// Its class (one of the letters' bits).
    pub class: u32,
    /// The event name (`set`, `lpush`, `expired`, ...).
    pub event: &'static str,
    /// The database.
    pub db: usize,
    /// The key.
    pub key: Vec<u8>,
}

impl Registry {
    /// Whether events of `class` are published at all.
    pub fn wants(&self, class: u32) -> bool {
        let flags = self.notify_flags();
        flags & class != 0 && flags & (KEYSPACE | KEYEVENT) != 0
    }

    /// Publishes `ev` on the keyspace and keyevent channels enabled.
    pub fn notify_event(&self, ev: &KeyEvent) {
        let flags = self.notify_flags();
        if flags & ev.class == 0 {
            return;
        }
        if flags & KEYSPACE != 0 {
            let mut ch = format!("__keyspace@{}__:", ev.db).into_bytes();
            ch.extend_from_slice(&ev.key);
            self.publish(&ch, ev.event.as_bytes(), false);
        }
        if flags & KEYEVENT != 0 {
            let ch = format!("__keyevent@{}__:{}", ev.db, ev.event);
            self.publish(ch.as_bytes(), &ev.key, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip_like_redis() {
        let f = |s: &str| format(parse(s.as_bytes()).unwrap());
        assert_eq!(f("gKE"), "gKE");
        assert_eq!(f("$lshzxeKE"), "$lshzxeKE");
        assert_eq!(f("KA"), "AK");
        assert_eq!(f("EA"), "AE");
        assert_eq!(f("An"), "An");
        assert_eq!(f(""), "");
        assert!(parse(b"Q").is_none());
    }
}
