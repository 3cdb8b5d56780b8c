use super::{Cluster, Timestamp};
use serde::{Deserialize, Serialize};

/// Headline numbers for the overview.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub gpus_total: u32,
    /// Held by running jobs.
    pub gpus_allocated: u32,
    /// Free on nodes that accept work.
    pub gpus_idle: u32,
    /// On drained, draining, cordoned, down or unknown nodes and not allocated.
    pub gpus_unavailable: u32,
    /// Mean utilization over GPUs that report it.
    pub utilization: Option<f64>,
    pub jobs_running: u32,
    pub jobs_pending: u32,
    /// Submit time of the longest-waiting pending job.
    pub oldest_pending_submit: Option<Timestamp>,
    /// Events in the last hour of the snapshot's clock.
    pub recent_events: u32,
}

impl Summary {
    pub fn of(c: &Cluster) -> Summary {
        let mut s = Summary::default();
        let (mut util_sum, mut util_n) = (0.0, 0u32);
        for n in &c.nodes {
            let alloc = n.gpus_allocated();
            s.gpus_total += n.gpu_count;
            s.gpus_allocated += alloc;
            if n.state.schedulable() {
                s.gpus_idle += n.gpu_count.saturating_sub(alloc);
            } else {
                s.gpus_unavailable += n.gpu_count.saturating_sub(alloc);
            }
            for g in &n.gpus {
                if let Some(u) = g.utilization {
                    util_sum += u;
                    util_n += 1;
                }
            }
        }
        s.utilization = (util_n > 0).then(|| util_sum / f64::from(util_n));
        for j in &c.jobs {
            if j.state.holds_resources() {
                s.jobs_running += 1;
            } else if j.state.is_pending() {
                s.jobs_pending += 1;
                // A requeued job waits from its requeue, not its submission.
                if let Some(t) = j.waiting_since() {
                    s.oldest_pending_submit = Some(s.oldest_pending_submit.map_or(t, |o| o.min(t)));
                }
            }
        }
        s.recent_events = c.events.iter().filter(|e| e.time > c.time - 3600).count() as u32;
        s
    }

    /// Seconds the longest-waiting pending job has waited.
    pub fn longest_wait_s(&self, now: Timestamp) -> Option<i64> {
        self.oldest_pending_submit.map(|t| (now - t).max(0))
    }
}
