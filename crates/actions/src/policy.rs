//! Safety policies, with safe defaults: read-only mode, no acting on stale
//! data, and a circuit breaker on taking capacity out of service.

use super::Action;
use crate::model::Cluster;
pub use crate::protocol::action::Refusal;
use std::time::Duration;

/// The guard's policies: read-only, data age, and the circuit breaker.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub read_only: bool,
    /// Refuse to act on data older than this.
    pub max_data_age: Duration,
    /// Refuse to take a node out if more than this share of its partition's
    /// nodes would then be out of service.
    pub max_partition_share_out: f64,
    /// Refuse to take more than this many nodes out within `window`.
    pub max_nodes_per_window: u32,
    pub window: Duration,
    /// The cluster's name in `[[clusters]]`, when it is one of several:
    /// the breaker counts what was done to this cluster alone (records
    /// under this name or the snapshot's).
    pub cluster: Option<String>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            read_only: false,
            max_data_age: Duration::from_secs(30),
            max_partition_share_out: 0.25,
            max_nodes_per_window: 3,
            window: Duration::from_secs(600),
            cluster: None,
        }
    }
}

impl Policy {
    /// Checks an action. `recent_out` is how many nodes were taken out of
    /// service within the window (from the audit log); `force` overrides
    /// the circuit breaker only.
    pub fn check(
        &self,
        a: &Action,
        c: &Cluster,
        data_age: Duration,
        recent_out: u32,
        force: bool,
    ) -> Result<(), Refusal> {
        self.check_counted(a, c, data_age, (recent_out, &[]), force)
    }

    /// [`Policy::check`] with the nodes the breaker counted, named in its
    /// refusal (each with its time).
    pub fn check_listing(
        &self,
        a: &Action,
        c: &Cluster,
        data_age: Duration,
        recent: &[(String, i64)],
        force: bool,
    ) -> Result<(), Refusal> {
        self.check_counted(a, c, data_age, (recent.len() as u32, recent), force)
    }

    /// The names the breaker counts this cluster's records under.
    pub fn clusters<'a>(&'a self, snapshot: &'a str) -> Vec<&'a str> {
        let mut out = vec![snapshot];
        if let Some(c) = self.cluster.as_deref() {
            out.push(c);
        }
        out
    }

    fn check_counted(
        &self,
        a: &Action,
        c: &Cluster,
        data_age: Duration,
        (recent_out, listed): (u32, &[(String, i64)]),
        force: bool,
    ) -> Result<(), Refusal> {
        if self.read_only {
            return Err(Refusal::ReadOnly);
        }
        if let Some(why) = crate::engine::admit::missing_target(a, c) {
            return Err(Refusal::Unknown(why));
        }
        if data_age > self.max_data_age {
            return Err(Refusal::Stale(format!(
                "{}s old, limit {}s",
                data_age.as_secs(),
                self.max_data_age.as_secs()
            )));
        }
        let Some(node) = a.takes_out() else {
            return Ok(());
        };
        if force || c.node(node).is_some_and(|n| !n.state.schedulable()) {
            return Ok(());
        }
        if recent_out >= self.max_nodes_per_window {
            let named: Vec<String> = listed
                .iter()
                .map(|(n, t)| {
                    format!(
                        "{} at {}",
                        crate::text::sanitize(n),
                        crate::text::moment(*t, c.time)
                    )
                })
                .collect();
            return Err(Refusal::Breaker(format!(
                "{recent_out} node(s) already taken out in the last {} min{}; limit {}",
                self.window.as_secs() / 60,
                if named.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", named.join(", "))
                },
                self.max_nodes_per_window
            )));
        }
        for p in c
            .node(node)
            .map(|n| n.partitions.clone())
            .unwrap_or_default()
            .iter()
        {
            let members: Vec<_> = c
                .nodes
                .iter()
                .filter(|n| n.partitions.contains(p))
                .collect();
            let already = members.iter().filter(|n| !n.state.schedulable()).count();
            // The breaker stops mass actions: the first node out of a
            // partition (one broken node in a small partition, the commonest
            // case at 3am) is never refused by the share rule.
            if already == 0 {
                continue;
            }
            let out = already + 1;
            let share = out as f64 / members.len().max(1) as f64;
            if share > self.max_partition_share_out + 1e-9 {
                return Err(Refusal::Breaker(format!(
                    "{out} of {} nodes of partition {p} ({:.0}%) would be out of service; limit {:.0}%",
                    members.len(),
                    share * 100.0,
                    self.max_partition_share_out * 100.0
                )));
            }
        }
        Ok(())
    }
}
