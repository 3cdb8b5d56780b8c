//! Guarded actions: every change to the cluster goes through one guard —
//! preview → confirm → execute → verify → audit — for the TUI and the CLI
//! alike. Each backend only supplies an executor.

pub mod audit;
pub mod executor;
pub mod follow;
pub mod guard;
pub mod policy;
pub mod runner;
pub mod seal;

pub use crate::model::Action;
use crate::model::Cluster;

/// "Top of its partition": one above the highest pending priority there.
pub fn top_priority(c: &Cluster, job: &str) -> Result<u64, crate::engine::error::EngineError> {
    let j = c
        .job(job)
        .ok_or_else(|| crate::engine::error::EngineError::NoJob(job.to_string()))?;
    let max = c
        .jobs
        .iter()
        .filter(|x| x.state.is_pending() && x.partition == j.partition && x.id != j.id)
        .filter_map(|x| x.priority)
        .max()
        .unwrap_or(0);
    Ok(max.saturating_add(1).max(j.priority.unwrap_or(0)))
}

#[cfg(test)]
mod tests;
