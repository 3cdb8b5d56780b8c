//! Back to service through a check: what the options' "validate, then
//! resume" and a remedied incident both say, in one set of words, and
//! when a node that still runs work is empty (a check needs the whole
//! node).

use crate::model::{Cluster, Timestamp};

/// Whether `node` still runs work, and if so when it is empty at the
/// latest (its jobs' time limits; `None` inside when a job has none).
pub fn busy_until(c: &Cluster, node: &str) -> Option<Option<Timestamp>> {
    let mut ends = Some(c.time);
    let mut any = false;
    for j in c.jobs_on_node(node).filter(|j| j.state.holds_resources()) {
        any = true;
        ends = match (ends, j.start_time.get(), j.time_limit) {
            (Some(e), Some(s), Some(crate::model::TimeLimit::Seconds(l))) => {
                Some(e.max(s + l as i64))
            }
            _ => None,
        };
    }
    any.then_some(ends)
}

/// "validate (DCGM level N), then resume", or for a node that still runs
/// work, "validate (DCGM level N) once its jobs end (by 03:10:00), then
/// resume": the option's title and the incident's last words.
pub fn words(level: u8, busy: Option<Option<Timestamp>>) -> String {
    match busy {
        None => format!("validate (DCGM level {level}), then resume"),
        Some(by) => format!(
            "validate (DCGM level {level}) once its jobs end{}, then resume",
            by.map_or(String::new(), |t| format!(
                " (by {} at the latest)",
                crate::text::clock(t)
            ))
        ),
    }
}

/// A node whose remedy waits for the next drain window (a pending row
/// remap: reset the GPU) that is drained and empty: that window is now.
/// The options recommend keeping it out for the remedy, and its incident
/// says the drain happened, in the same words.
pub fn remedy_window(c: &Cluster, node: &str, class: crate::engine::xid::ActionClass) -> bool {
    class == crate::engine::xid::ActionClass::ResetNextDrain
        && c.node(node).is_some_and(|n| {
            matches!(
                n.state,
                crate::model::NodeState::Drain | crate::model::NodeState::Down
            )
        })
        && busy_until(c, node).is_none()
}

/// Whether a node's own GPUs still need their remedy (a drain's, or a
/// reset at the next drain window): it is not put back through a check
/// until that is done, whatever its domain does.
pub fn own_remedy_pending(class: crate::engine::xid::ActionClass) -> bool {
    class == crate::engine::xid::ActionClass::ResetNextDrain || class.needs_drain()
}
