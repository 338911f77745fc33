//! Bulk keys written to the primary before its replicas start, so their
//! first full sync (and every later one: a killed replica, the old primary
//! after a failover) carries an image of some size, and a kill during a
//! sync can land in the middle of loading it. Nobody changes them
//! afterwards: every server must hold each of them, exactly, at every
//! check.

use rand::rngs::StdRng;
use rand::Rng;

use super::model::{Entry, Model, Val};
use crate::oracle::show;
use crate::resp_client::{Client, Reply};

/// The bulk keys of a round and their values.
pub struct Preload {
    keys: Model,
}

/// The name of bulk key `i`.
pub fn key_name(i: usize) -> Vec<u8> {
    format!("repl-bulk-{i:05}").into_bytes()
}

impl Preload {
    /// Up to `max_keys` keys of 16 to 600 bytes.
    pub fn new(rng: &mut StdRng, max_keys: usize) -> Preload {
        let n = rng.gen_range(0..=max_keys);
        let keys = (0..n)
            .map(|i| {
                let len = rng.gen_range(16..600);
                let seed: u32 = rng.gen();
                let v: Vec<u8> = format!("{i}-{seed:08x}-").bytes().cycle().take(len).collect();
                (key_name(i), Entry { val: Val::Str(v), ttl: false })
            })
            .collect();
        Preload { keys }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether `key` is a bulk key.
    pub fn owns(&self, key: &[u8]) -> bool {
        self.keys.contains_key(key)
    }

    /// Writes every key with MSETs of 100. `Err` inside: a refused write.
    pub fn write(&self, c: &mut Client) -> anyhow::Result<Result<(), String>> {
        let all: Vec<(&Vec<u8>, &[u8])> = self
            .keys
            .iter()
            .filter_map(|(k, e)| match &e.val {
                Val::Str(v) => Some((k, v.as_slice())),
                _ => None,
            })
            .collect();
        for chunk in all.chunks(100) {
            let mut args: Vec<&[u8]> = vec![b"MSET"];
            for (k, v) in chunk {
                args.push(k);
                args.push(v);
            }
            match c.call(&args)? {
                Reply::Simple(s) if s == "OK" => {}
                other => return Ok(Err(format!("preload MSET answered {other:?}"))),
            }
        }
        Ok(Ok(()))
    }

    /// Every bulk key must be in `got` with its value and no TTL.
    pub fn check(&self, got: &Model) -> Result<(), String> {
        let bad: Vec<String> = self
            .keys
            .iter()
            .filter(|(k, e)| got.get(*k) != Some(*e))
            .take(3)
            .map(|(k, _)| match got.get(k) {
                None => format!("{} missing", show(k)),
                Some(_) => format!("{} changed", show(k)),
            })
            .collect();
        if bad.is_empty() {
            Ok(())
        } else {
            Err(format!("bulk keys written before the replicas started: {}", bad.join("; ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn check_wants_every_bulk_key_unchanged() {
        let mut rng = StdRng::seed_from_u64(3);
        let p = Preload::new(&mut rng, 50);
        let mut got = p.keys.clone();
        assert!(p.check(&got).is_ok());
        let Some(k) = got.keys().next().cloned() else { return };
        if let Some(e) = got.get_mut(&k) {
            e.ttl = true;
        }
        assert!(p.check(&got).is_err(), "a TTL appeared");
        got.remove(&k);
        assert!(p.check(&got).is_err(), "a key lost");
    }
}
