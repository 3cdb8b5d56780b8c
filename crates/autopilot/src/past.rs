//! What the autopilot did before, read from the audit log every process
//! shares: the actions its policies sent (for the ladder's count, the
//! limits, and not sending a step twice), the steps armed, and whether a
//! person paused it.

use crate::model::audit::Record;
use crate::model::{Action, Armed, Cluster, Phase, Timestamp};
use crate::policy::Policy;

/// The operator its records name: `policy:<name>`.
pub fn operator_of(policy: &str) -> String {
    format!("{OPERATOR_PREFIX}{policy}")
}

pub const OPERATOR_PREFIX: &str = "policy:";

/// One action a policy sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    pub policy: String,
    pub verb: String,
    pub target: String,
    /// The incident it answered (its audit line).
    pub incident: Option<String>,
    /// The source's clock when it was sent.
    pub at: Timestamp,
}

/// The autopilot's past, for one cluster.
#[derive(Debug, Clone, Default)]
pub struct Past {
    pub sent: Vec<Sent>,
    pub armed: Vec<Armed>,
    pub paused: Option<crate::model::AutopilotPaused>,
}

impl Past {
    /// From the audit log's records and armed steps, for `cluster`.
    pub fn read(records: &[Record], armed: Vec<Armed>, cluster: &str) -> Past {
        let mut past = Past {
            armed: armed.into_iter().filter(|a| a.cluster == cluster).collect(),
            ..Past::default()
        };
        for r in records {
            if (r.cluster != cluster && !r.cluster.is_empty()) || r.phase != Phase::Intent {
                continue;
            }
            if let Some(p) = r.operator.strip_prefix(OPERATOR_PREFIX) {
                past.sent.push(Sent {
                    policy: p.to_string(),
                    verb: r.action.clone(),
                    target: r.target.clone(),
                    incident: r.incident.clone(),
                    at: r.source_time.unwrap_or(r.time),
                });
            }
        }
        past.paused = crate::actions::autopilot_state::paused_in(records, cluster);
        past
    }

    /// The autopilot sent `a` (its verb on its target) at or after `since`.
    pub fn sent_since(&self, a: &Action, since: Timestamp) -> bool {
        self.sent
            .iter()
            .any(|s| s.verb == a.verb() && s.target == a.target() && s.at >= since)
    }

    /// `a` is armed already.
    pub fn armed_for(&self, a: &Action) -> bool {
        self.armed.iter().any(|x| &x.action == a)
    }

    /// How many other incidents of `node` the autopilot acted on within
    /// `within_s` before `before`: the ladder's rung.
    pub fn earlier_incidents(&self, node: &str, before: Timestamp, within_s: i64) -> usize {
        let mut seen: Vec<&str> = self
            .sent
            .iter()
            .filter(|s| s.target == node && s.at < before && before - s.at <= within_s)
            .map(|s| s.incident.as_deref().unwrap_or(""))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        seen.len()
    }

    /// Why `policy` may not send more now: its actions in the last hour,
    /// on the cluster or on `node`'s partitions.
    pub fn over_limit(&self, policy: &Policy, c: &Cluster, node: &str) -> Option<String> {
        let hour: Vec<&Sent> = self
            .sent
            .iter()
            .filter(|s| s.policy == policy.name && c.time - s.at < 3600)
            .collect();
        if hour.len() as u32 >= policy.max_per_hour {
            return Some(format!(
                "policy {} sent {} action(s) in the last hour (max_per_hour = {}): a person decides the next",
                policy.name,
                hour.len(),
                policy.max_per_hour
            ));
        }
        let limit = policy.max_per_partition_per_hour?;
        let parts = c.node(node).map(|n| n.partitions.clone())?;
        for p in parts.iter() {
            let n = hour
                .iter()
                .filter(|s| {
                    c.node(&s.target)
                        .is_some_and(|n| n.partitions.iter().any(|q| q == p))
                })
                .count() as u32;
            if n >= limit {
                return Some(format!(
                    "policy {} sent {n} action(s) on partition {p} in the last hour (max_per_partition_per_hour = {limit}): a person decides the next",
                    policy.name
                ));
            }
        }
        None
    }
}
