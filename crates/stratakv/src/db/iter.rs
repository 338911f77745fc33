//! User iteration: the newest visible version of each key in a range,
//! tombstones hidden, in either direction.

use std::ops::Bound;
use std::sync::Arc;

use super::DbInner;
use crate::error::{Error, Result};
use crate::iterator::{InternalIterator, MergingIterator};
use crate::key::{internal_key, KeyRange, Kind, ParsedKey, SeqNo, MAX_SEQ};
use crate::version::RangeDels;

fn parse(ikey: &[u8]) -> Result<ParsedKey<'_>> {
    ParsedKey::parse(ikey).ok_or_else(|| Error::corruption("<iterator>", 0, "malformed internal key"))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// A cursor over user keys (LevelDB's DBIter): positioned on the newest
/// version with sequence <= its snapshot, skipping tombstones.
pub struct Cursor {
    iter: MergingIterator,
    dels: Arc<RangeDels>,
    seq: SeqNo,
    range: KeyRange,
    direction: Direction,
    valid: bool,
    key: Vec<u8>,
    value: Vec<u8>,
    /// The partition's prefix: stripped from keys shown, added to keys sought.
    prefix: Vec<u8>,
}

impl Cursor {
    pub(crate) fn new((iter, dels): (MergingIterator, Arc<RangeDels>), seq: SeqNo, range: KeyRange) -> Cursor {
        Cursor {
            iter,
            dels,
            seq,
            range,
            direction: Direction::Forward,
            valid: false,
            key: Vec::new(),
            value: Vec::new(),
            prefix: Vec::new(),
        }
    }

    /// The same cursor over partition keys that begin with `prefix`.
    pub(crate) fn with_prefix(mut self, prefix: &[u8]) -> Cursor {
        self.prefix = prefix.to_vec();
        self
    }

    /// What the entry does for this cursor: a range tombstone turns a
    /// version it hides into a deletion.
    fn kind_of(&self, p: &ParsedKey<'_>) -> Kind {
        if !self.dels.is_empty() && self.dels.hides(p.user_key, p.seq, self.seq) {
            Kind::Delete
        } else {
            p.kind
        }
    }

    /// Whether the cursor is on a key.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current key.
    pub fn key(&self) -> &[u8] {
        self.key.get(self.prefix.len()..).unwrap_or(&[])
    }

    /// The current value.
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// Moves to the first key of the range.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.direction = Direction::Forward;
        match self.range.start.clone() {
            Bound::Unbounded => self.iter.seek_to_first()?,
            Bound::Included(s) | Bound::Excluded(s) => self.iter.seek(&internal_key(&s, MAX_SEQ, Kind::Put))?,
        }
        let skip = match &self.range.start {
            Bound::Excluded(s) => Some(s.clone()),
            _ => None,
        };
        self.find_next(skip)
    }

    /// Moves to the first key >= `key` within the range.
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        let mut full;
        let key = if self.prefix.is_empty() {
            key
        } else {
            full = self.prefix.clone();
            full.extend_from_slice(key);
            &full
        };
        if !self.range.after_start(key) {
            return self.seek_to_first();
        }
        self.direction = Direction::Forward;
        self.iter.seek(&internal_key(key, MAX_SEQ, Kind::Put))?;
        self.find_next(None)
    }

    /// Moves to the last key of the range.
    pub fn seek_to_last(&mut self) -> Result<()> {
        match self.range.end.clone() {
            Bound::Unbounded => self.iter.seek_to_last()?,
            // The last internal key of user key e is (e, seq 0, Delete).
            Bound::Included(e) => self.iter.seek_for_prev(&internal_key(&e, 0, Kind::Delete))?,
            Bound::Excluded(e) => {
                self.iter.seek(&internal_key(&e, MAX_SEQ, Kind::Put))?;
                if self.iter.valid() {
                    self.iter.prev()?;
                } else {
                    self.iter.seek_to_last()?;
                }
            }
        }
        self.find_prev()
    }

    /// Moves to the next key.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        if self.direction == Direction::Reverse {
            // The merged cursor sits before this key's versions; step in.
            self.direction = Direction::Forward;
            if self.iter.valid() {
                self.iter.next()?;
            } else {
                self.iter.seek_to_first()?;
            }
        } else {
            self.iter.next()?;
        }
        let skip = std::mem::take(&mut self.key);
        self.find_next(Some(skip))
    }

    /// Moves to the previous key.
    pub fn prev(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        if self.direction == Direction::Forward {
            // Step back past every version of the current key.
            loop {
                self.iter.prev()?;
                if !self.iter.valid() {
                    self.valid = false;
                    return Ok(());
                }
                if crate::key::user_key(self.iter.key()) < self.key.as_slice() {
                    break;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev()
    }

    fn find_next(&mut self, mut skip: Option<Vec<u8>>) -> Result<()> {
        while self.iter.valid() {
            let p = parse(self.iter.key())?;
            if !self.range.before_end(p.user_key) {
                break;
            }
            let hidden = skip.as_deref().map(|s| p.user_key <= s).unwrap_or(false);
            if p.seq <= self.seq && !hidden {
                match self.kind_of(&p) {
                    Kind::Delete => skip = Some(p.user_key.to_vec()),
                    Kind::Put => {
                        self.key.clear();
                        self.key.extend_from_slice(p.user_key);
                        self.value.clear();
                        self.value.extend_from_slice(self.iter.value());
                        self.valid = true;
                        return Ok(());
                    }
                }
            }
            self.iter.next()?;
        }
        self.valid = false;
        Ok(())
    }

    fn find_prev(&mut self) -> Result<()> {
        self.direction = Direction::Reverse;
        let mut kind = Kind::Delete;
        while self.iter.valid() {
            let p = parse(self.iter.key())?;
            if p.seq <= self.seq {
                if kind != Kind::Delete && p.user_key < self.key.as_slice() {
                    break;
                }
                if !self.range.after_start(p.user_key) {
                    if kind == Kind::Delete {
                        break;
                    }
                } else {
                    kind = self.kind_of(&p);
                    self.key.clear();
                    self.value.clear();
                    if kind == Kind::Put {
                        self.key.extend_from_slice(p.user_key);
                        self.value.extend_from_slice(self.iter.value());
                    }
                }
            }
            self.iter.prev()?;
        }
        self.valid = kind == Kind::Put;
        Ok(())
    }
}

/// Iterates a key range in order, forward (`next`) or backward (`rev`,
/// `next_back`), at the sequence number it was created with.
///
/// Items are `(key, value)`. A read error ends the iteration; check
/// [`DbIter::status`] afterwards (or use [`DbIter::try_next`]).
pub struct DbIter {
    db: Arc<DbInner>,
    range: KeyRange,
    seq: SeqNo,
    front: Option<Cursor>,
    back: Option<Cursor>,
    front_last: Option<Vec<u8>>,
    back_last: Option<Vec<u8>>,
    done: bool,
    error: Option<Error>,
    _pin: Option<super::Snapshot>,
    prefix: Vec<u8>,
}

impl DbIter {
    pub(crate) fn new(db: Arc<DbInner>, range: KeyRange, seq: SeqNo, pin: Option<super::Snapshot>) -> Result<DbIter> {
        Ok(DbIter {
            db,
            range,
            seq,
            front: None,
            back: None,
            front_last: None,
            back_last: None,
            done: false,
            error: None,
            _pin: pin,
            prefix: Vec::new(),
        })
    }

    /// The same iterator over a partition: `range` is in engine keys, and
    /// keys are shown without the partition's `prefix`.
    pub(crate) fn with_prefix(mut self, prefix: &[u8]) -> DbIter {
        self.prefix = prefix.to_vec();
        self
    }

    fn new_cursor(&self) -> Result<Cursor> {
        Ok(Cursor::new(self.db.merged_iter(&self.range)?, self.seq, self.range.clone()).with_prefix(&self.prefix))
    }

    /// A positionable cursor over the same range and sequence.
    pub fn cursor(&self) -> Result<Cursor> {
        self.new_cursor()
    }

    /// The error that ended iteration, if any.
    pub fn status(&self) -> Result<(), &Error> {
        match &self.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Like `next`, but reports errors.
    pub fn try_next(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        match self.step_front() {
            Ok(v) => Ok(v),
            Err(e) => {
                self.done = true;
                Err(e)
            }
        }
    }

    fn step_front(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if self.done {
            return Ok(None);
        }
        let c = match &mut self.front {
            Some(c) => {
                c.next()?;
                c
            }
            None => {
                let mut c = self.new_cursor()?;
                c.seek_to_first()?;
                self.front.insert(c)
            }
        };
        if !c.valid() || self.back_last.as_deref().map(|b| c.key() >= b).unwrap_or(false) {
            self.done = true;
            return Ok(None);
        }
        let kv = (c.key().to_vec(), std::mem::take(&mut c.value));
        self.front_last = Some(kv.0.clone());
        Ok(Some(kv))
    }

    fn step_back(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if self.done {
            return Ok(None);
        }
        let c = match &mut self.back {
            Some(c) => {
                c.prev()?;
                c
            }
            None => {
                let mut c = self.new_cursor()?;
                c.seek_to_last()?;
                self.back.insert(c)
            }
        };
        if !c.valid() || self.front_last.as_deref().map(|f| c.key() <= f).unwrap_or(false) {
            self.done = true;
            return Ok(None);
        }
        let kv = (c.key().to_vec(), std::mem::take(&mut c.value));
        self.back_last = Some(kv.0.clone());
        Ok(Some(kv))
    }
}

impl Iterator for DbIter {
    type Item = (Vec<u8>, Vec<u8>);

    fn next(&mut self) -> Option<Self::Item> {
        match self.step_front() {
            Ok(v) => v,
            Err(e) => {
                self.error = Some(e);
                self.done = true;
                None
            }
        }
    }
}

impl DoubleEndedIterator for DbIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self.step_back() {
            Ok(v) => v,
            Err(e) => {
                self.error = Some(e);
                self.done = true;
                None
            }
        }
    }
}
