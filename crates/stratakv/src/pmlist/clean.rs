//! Log cleaning for the L1 list: nodes that live in mostly dead extents
//! are copied to fresh space and take their originals' places, so those
//! extents empty and can be freed (ListDB reclaims only whole dead log
//! blocks; under random overwrites few ever empty).
//!
//! One walk of level 0 finds every node to move, with its predecessor on
//! every level (the last node of its region seen on that level). Each move
//! keeps the list whole at every store: (a) the node leaves its upper
//! levels, (b) one store on level 0 swaps the copy in (its links written
//! and persisted first), (c) the copy joins the upper levels. Upper levels
//! point only at nodes on level 0 at every moment, so a crash leaves either
//! the original or the copy on level 0, never both, never neither.

use super::node::{Node, MAX_HEIGHT};
use super::{ListHead, ListSpace, Pos};
use crate::error::Result;

/// What a cleaning walk did.
#[derive(Debug, Default)]
pub(crate) struct Moved {
    /// Originals no longer linked.
    pub dead: Vec<u64>,
    /// Their copies, now linked.
    pub copies: Vec<u64>,
}

/// Moves every node of `list` for which `victim` says so to the copy
/// `copy` makes of it (None: no room left; the walk stops there).
pub(crate) fn relocate(
    space: &ListSpace,
    list: ListHead,
    victim: &dyn Fn(u64) -> bool,
    copy: &mut dyn FnMut(&Node) -> Result<Option<u64>>,
) -> Result<Moved> {
    let regions = list.regions.max(1);
    let mut last: Vec<[Pos; MAX_HEIGHT]> = (0..regions).map(|r| [Pos::head(list.links(r)); MAX_HEIGHT]).collect();
    let mut prev0 = Pos::head(list.links(0));
    let mut out = Moved::default();
    while let Some(mut n) = space.next_node(prev0.links)? {
        let r = list.region_of(&n);
        if victim(n.off) {
            let Some(c_off) = copy(&n)? else { break };
            for i in (1..n.height).rev() {
                let p = last[r][i];
                if space.next(p.links, i)? == n.off {
                    space.publish(p.links + 8 * i as u64, space.next(n.links(), i)?)?;
                }
            }
            let c = space.node(c_off)?;
            space.publish(c.links(), space.next(n.links(), 0)?)?;
            space.publish(prev0.links, c_off)?;
            for (i, p) in last[r].iter().enumerate().take(c.height).skip(1) {
                space.publish(c.links() + 8 * i as u64, space.next(p.links, i)?)?;
                space.publish(p.links + 8 * i as u64, c_off)?;
            }
            out.dead.push(n.off);
            out.copies.push(c_off);
            n = c;
        }
        for p in last[r].iter_mut().take(n.height).skip(1) {
            *p = Pos::at(n);
        }
        prev0 = Pos::at(n);
    }
    Ok(out)
}
