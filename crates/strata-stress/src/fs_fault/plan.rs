//! Choosing which file-system operation fails, and how.

use rand::rngs::StdRng;
use rand::Rng;
use stratakv::fs::{FaultError, FaultOp, FaultPlan};

/// A random plan: the operation kind, how many of them pass first (scaled
/// to how often the engine does that operation in an episode), EIO or
/// ENOSPC, once or sticky, torn or not.
pub fn random_plan(rng: &mut StdRng) -> FaultPlan {
    let op = match rng.gen_range(0..100) {
        0..=24 => FaultOp::Append,
        25..=49 => FaultOp::Sync,
        50..=61 => FaultOp::Create,
        62..=71 => FaultOp::Rename,
        72..=83 => FaultOp::SyncDir,
        84..=89 => FaultOp::Remove,
        _ => FaultOp::Read,
    };
    let nth = match op {
        FaultOp::Append => rng.gen_range(1..400),
        FaultOp::Sync => rng.gen_range(1..60),
        FaultOp::Create => rng.gen_range(1..30),
        FaultOp::Rename => rng.gen_range(1..4),
        FaultOp::SyncDir => rng.gen_range(1..20),
        FaultOp::Remove => rng.gen_range(1..10),
        FaultOp::Read => rng.gen_range(1..300),
    };
    let enospc_possible = matches!(op, FaultOp::Append | FaultOp::Sync | FaultOp::Create | FaultOp::SyncDir);
    let error = if enospc_possible && rng.gen_bool(0.4) { FaultError::Enospc } else { FaultError::Eio };
    let sticky = match error {
        FaultError::Enospc => rng.gen_bool(0.7),
        FaultError::Eio => rng.gen_bool(0.3),
    };
    let tear = (op == FaultOp::Append && rng.gen_bool(0.5)).then(|| rng.gen_range(0.0..1.0));
    FaultPlan { op, nth, error, sticky, tear, path_contains: None }
}

/// Whether a live database must poison itself after this fault fired:
/// an EIO on anything that writes (a flush, compaction or MANIFEST change
/// failed and its durable state is unknown). ENOSPC is retried instead,
/// a failed remove is ignored (best effort), a failed read is reported to
/// the reader (or poisons, if a compaction read it).
pub fn must_poison(plan: &FaultPlan) -> bool {
    plan.error == FaultError::Eio
        && matches!(plan.op, FaultOp::Create | FaultOp::Append | FaultOp::Sync | FaultOp::Rename | FaultOp::SyncDir)
}

/// Short description for reports.
pub fn describe(plan: &FaultPlan) -> String {
    format!(
        "{} #{} -> {}{}{}",
        plan.op.name(),
        plan.nth,
        plan.error.name(),
        if plan.sticky { " sticky" } else { "" },
        plan.tear.map(|t| format!(" torn {t:.2}")).unwrap_or_default()
    )
}
