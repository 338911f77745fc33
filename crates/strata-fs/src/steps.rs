//! Participant side of the coordinator's transactions: idempotent steps on
//! one server, each one atomic batch under the directory's stripe lock.
//! Replaying a step that was already applied changes nothing, which is
//! what lets the coordinator roll an intent forward after any crash.

use std::sync::atomic::Ordering;

use stratakv::WriteBatch;

use crate::error::FsResult;
use crate::ids::key;
use crate::proto::{Step, StepOut};
use crate::store::{enc, Store};
use crate::types::{now_ns, Kind};

impl Store {
    /// Applies one step (see [`Step`]).
    pub fn step(&self, s: &Step) -> FsResult<StepOut> {
        match s {
            Step::Get { key } => Ok(StepOut::Value(self.db.get(key)?)),
            Step::PutContent { id, rec } => {
                let _s = self.stripe(*id);
                if let Some(c) = self.content(*id)? {
                    let same = c.birth_parent == rec.birth_parent
                        && c.birth_name == rec.birth_name
                        && c.version == rec.version;
                    return Ok(if same { StepOut::Done } else { StepOut::Conflict("id in use".into()) });
                }
                self.db.put_opt(key::content(*id), enc(rec)?, &self.wo)?;
                Ok(StepOut::Done)
            }
            Step::DelContent { id } => {
                let _s = self.stripe(*id);
                let mut b = WriteBatch::new();
                b.delete(key::content(*id));
                let rl = key::rename_list_prefix(*id);
                for (k, _) in self.db.iter(rl.clone()..key::prefix_end(&rl))? {
                    b.delete(k);
                }
                self.db.write_opt(&b, &self.wo)?;
                Ok(StepOut::Done)
            }
            Step::Fence { id } => {
                let _s = self.stripe(*id);
                let Some(mut c) = self.content(*id)? else { return Ok(StepOut::Empty(None)) };
                if !c.fenced {
                    c.fenced = true;
                    self.db.put_opt(key::content(*id), enc(&c)?, &self.wo)?;
                }
                let prefix = key::access_prefix(*id);
                let mut it = self.db.iter(prefix.clone()..key::prefix_end(&prefix))?;
                let empty = it.try_next()?.is_none();
                Ok(StepOut::Empty(Some(empty)))
            }
            Step::Unfence { id } => {
                let _s = self.stripe(*id);
                if let Some(mut c) = self.content(*id)? {
                    if c.fenced {
                        c.fenced = false;
                        self.db.put_opt(key::content(*id), enc(&c)?, &self.wo)?;
                    }
                }
                Ok(StepOut::Done)
            }
            Step::SetContentLoc { id, parent, name } => {
                let _s = self.stripe(*id);
                if let Some(mut c) = self.content(*id)? {
                    if c.parent != *parent || c.name != *name {
                        c.parent = *parent;
                        c.name = name.clone();
                        self.db.put_opt(key::content(*id), enc(&c)?, &self.wo)?;
                    }
                }
                Ok(StepOut::Done)
            }
            Step::SetContentPerm { id, perm } => {
                let _s = self.stripe(*id);
                if let Some(mut c) = self.content(*id)? {
                    if c.perm != *perm {
                        c.perm = *perm;
                        self.db.put_opt(key::content(*id), enc(&c)?, &self.wo)?;
                    }
                }
                Ok(StepOut::Done)
            }
            Step::PutAccess { pid, name, rec, replace_file, replace_dir, tx } => {
                let _s = self.stripe(*pid);
                if let Some(tx) = tx {
                    if self.db.get(key::tx_marker(*tx, 1))?.is_some() {
                        return Ok(StepOut::Done);
                    }
                }
                let Some(mut c) = self.content(*pid)? else { return Ok(StepOut::Conflict("parent gone".into())) };
                match self.access(*pid, name)? {
                    Some(old) if old.id == rec.id => return Ok(StepOut::Done),
                    Some(old) if old.kind == Kind::Dir && Some(old.id) != *replace_dir => {
                        return Ok(StepOut::Conflict("a directory holds the name".into()))
                    }
                    Some(old) if old.kind != Kind::Dir && !replace_file => {
                        return Ok(StepOut::Conflict("a file holds the name".into()))
                    }
                    _ => {}
                }
                if c.fenced {
                    return Ok(StepOut::Conflict("parent is being removed".into()));
                }
                c.mtime_ns = now_ns();
                let mut b = WriteBatch::new();
                b.put(key::access(*pid, name), enc(rec)?).put(key::content(*pid), enc(&c)?);
                if let Some(tx) = tx {
                    b.put(key::tx_marker(*tx, 1), []);
                }
                self.db.write_opt(&b, &self.wo)?;
                Ok(StepOut::Done)
            }
            Step::ForgetTx { tx } => {
                let mut b = WriteBatch::new();
                b.delete(key::tx_marker(*tx, 0)).delete(key::tx_marker(*tx, 1));
                self.db.write_opt(&b, &self.wo)?;
                Ok(StepOut::Done)
            }
            Step::DelAccessIf { pid, name, id, tx } => {
                let _s = self.stripe(*pid);
                if let Some(tx) = tx {
                    if self.db.get(key::tx_marker(*tx, 0))?.is_some() {
                        return Ok(StepOut::Done);
                    }
                }
                if self.access(*pid, name)?.is_some_and(|a| a.id == *id) {
                    let mut b = WriteBatch::new();
                    b.delete(key::access(*pid, name));
                    if let Some(tx) = tx {
                        b.put(key::tx_marker(*tx, 0), []);
                    }
                    if let Some(mut c) = self.content(*pid)? {
                        c.mtime_ns = now_ns();
                        b.put(key::content(*pid), enc(&c)?);
                    }
                    self.db.write_opt(&b, &self.wo)?;
                } else if tx.is_some() {
                    return Ok(StepOut::Conflict("source gone".into()));
                }
                Ok(StepOut::Done)
            }
            Step::SetAccessPerm { pid, name, id, perm } => {
                let _s = self.stripe(*pid);
                if let Some(mut a) = self.access(*pid, name)? {
                    if a.id == *id && a.perm != *perm {
                        a.perm = *perm;
                        a.ctime_ns = now_ns();
                        self.db.put_opt(key::access(*pid, name), enc(&a)?, &self.wo)?;
                    }
                }
                Ok(StepOut::Done)
            }
            Step::PutRenameList { pid, name, version } => {
                self.db.put_opt(key::rename_list(*pid, name, *version), [], &self.wo)?;
                Ok(StepOut::Done)
            }
            Step::DelRenameList { pid, name, version } => {
                self.db.delete_opt(key::rename_list(*pid, name, *version), &self.wo)?;
                Ok(StepOut::Done)
            }
            Step::Inval { id, seq } => {
                let mut g = self.inval.write();
                let cur = g.get(id).map_or(0, |(s, _)| *s);
                if *seq > cur {
                    let ms = now_ns() / 1_000_000;
                    let mut v = seq.to_be_bytes().to_vec();
                    v.extend_from_slice(&ms.to_be_bytes());
                    self.db.put_opt(key::inval(*id), v, &self.wo)?;
                    g.insert(*id, (*seq, ms));
                }
                self.max_seq.fetch_max(*seq, Ordering::AcqRel);
                Ok(StepOut::Done)
            }
        }
    }
}
