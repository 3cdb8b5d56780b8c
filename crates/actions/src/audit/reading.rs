//! What was read of the audit log: its records, the armed steps among
//! them, and the circuit breaker's count of the nodes taken out.

use super::incident::fault_of_incident;
use super::{AuditError, Record};
use crate::model::Phase;
use crate::model::{Cluster, NodeState};

/// What [`AuditLog::armed_checked`] found.
#[derive(Debug, Clone, Default)]
pub struct ArmedSteps {
    pub trusted: Vec<crate::model::Armed>,
    /// Steps that will not be fired, with why.
    pub refused: Vec<(crate::model::Armed, String)>,
    /// Lines of the log that are not records (torn, not UTF-8).
    pub skipped: Vec<String>,
    /// Files of the log that could not be read.
    pub unreadable: Vec<String>,
}

impl ArmedSteps {
    /// Why what is armed cannot be known: a file of the log that cannot be
    /// read, or steps whose seal cannot be checked (the key is unusable).
    /// "Nothing armed" is then not said, nor a success (issue 59).
    pub fn unverifiable(&self) -> Option<String> {
        if let Some(f) = self.unreadable.first() {
            return Some(f.clone());
        }
        let n = self
            .refused
            .iter()
            .filter(|(_, why)| why.starts_with(super::super::seal::CANNOT_CHECK))
            .count();
        self.refused
            .iter()
            .find(|(_, why)| why.starts_with(super::super::seal::CANNOT_CHECK))
            .map(|(_, why)| format!("{n} armed step(s) cannot be verified: {why}"))
    }

    /// What a listing of armed steps must say besides them, a line each:
    /// the steps that will not be fired and the lines that were skipped.
    pub fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .refused
            .iter()
            .map(|(a, why)| {
                format!(
                    "not sent: the armed {} {} ({}): {why}",
                    a.action.verb(),
                    crate::text::sanitize(a.action.target()),
                    crate::text::sanitize(&a.id)
                )
            })
            .collect();
        out.extend(
            self.skipped
                .iter()
                .map(|s| crate::text::sanitize(s).into_owned()),
        );
        out.extend(
            self.unreadable
                .iter()
                .map(|s| crate::text::sanitize(s).into_owned()),
        );
        out
    }
}

/// What [`AuditLog::reading`] found.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    pub records: Vec<Record>,
    /// One line each: `FILE line N: why` for a line that is not a record.
    pub skipped: Vec<String>,
    /// One line each for a file that could not be read at all.
    pub unreadable: Vec<AuditError>,
}

impl Reading {
    /// Intents with no outcome: actions interrupted (a dropped SSH
    /// session, a killed process) or still in flight in another nightshift.
    pub fn unfinished(&self) -> Vec<&Record> {
        let done: std::collections::HashSet<&str> = self
            .records
            .iter()
            .filter(|r| r.phase == Phase::Outcome)
            .map(|r| r.id.as_str())
            .collect();
        self.records
            .iter()
            .filter(|r| r.phase == Phase::Intent && !done.contains(r.id.as_str()))
            .collect()
    }

    /// The hardware faults the log's actions answered: each intent names
    /// the open incident it acted on (`e2 XID 79 on h100-03 GPU 3 (open)`),
    /// so a node's drains and cordons are part of its history. One incident
    /// acted on several times (cordoned, drained after its checkpoint,
    /// validated) is one fault, at its first intent. Only the records of
    /// `clusters` (the names the cluster is audited under): a log shared by
    /// several clusters may name the same node in each.
    pub fn faults(&self, clusters: &[&str]) -> Vec<crate::model::PastFault> {
        let mut seen = std::collections::HashSet::new();
        self.records
            .iter()
            .filter(|r| r.phase == Phase::Intent && clusters.contains(&r.cluster.as_str()))
            .filter_map(|r| {
                // The fault as data (node, GPU, kind, first time): the same
                // in every process, so three incidents of one node from
                // three runs are three faults, one incident acted on three
                // times is one.
                if let Some(f) = &r.fault {
                    let key = format!(
                        "{}\u{0}{:?}\u{0}{:?}\u{0}{}",
                        f.node, f.gpu, f.fault, f.time
                    );
                    return seen.insert(key).then(|| f.clone());
                }
                // Older records: the incident's line, read back.
                let incident = r.incident.as_deref()?;
                // The stage (`(open)`, `(remedied)`) changes; the rest names it.
                let key = incident.rsplit_once(" (").map_or(incident, |(k, _)| k);
                let fault = fault_of_incident(incident, r.time)?;
                seen.insert(key.to_string()).then_some(fault)
            })
            .collect()
    }

    /// `faults`, for every cluster the log names: what the console's
    /// analysis reads beside each snapshot (`protocol::source::Audited`).
    pub fn faults_by_cluster(&self) -> crate::protocol::source::Audited {
        let names: std::collections::BTreeSet<&str> =
            self.records.iter().map(|r| r.cluster.as_str()).collect();
        names
            .into_iter()
            .map(|n| (n.to_string(), self.faults(&[n])))
            .filter(|(_, f)| !f.is_empty())
            .collect()
    }

    /// Steps armed and not yet fired, refused or cancelled, oldest first.
    /// The armed records whose step has not ended: a step is its sealed
    /// id (the one inside its seal), and only an end sealed by `key` ends
    /// it (issue 59: an unsealed "cancelled" line ended a sealed step, and
    /// a fired step's line appended again under a new outer id was armed
    /// again). Without a key no end is believed, and no step either
    /// (`seal::trusted` refuses them all, saying why).
    pub fn armed_by(&self, key: Option<&[u8]>) -> Vec<&crate::model::Armed> {
        let ended: std::collections::HashSet<&str> = self
            .records
            .iter()
            .filter(|r| matches!(r.phase, Phase::Fired | Phase::Refused | Phase::Cancelled))
            .filter(|r| {
                key.zip(r.seal.as_deref()).is_some_and(|(k, t)| {
                    super::super::seal::verify_end(k, &r.id, r.phase.as_str(), t)
                })
            })
            .map(|r| r.id.as_str())
            .collect();
        self.records
            .iter()
            .filter(|r| r.phase == Phase::Armed)
            .filter_map(|r| r.armed.as_ref())
            .filter(|a| !ended.contains(a.id.as_str()))
            .collect()
    }

    /// Nodes taken out of service (cordon, drain) since `since`: every
    /// intent whose outcome did not say it failed to — done, partly done,
    /// or still in flight in another nightshift.
    pub fn nodes_taken_out_since(&self, since: i64) -> u32 {
        self.nodes_taken_out_since_except(since, None)
    }

    /// The ids of intents whose outcome says they took nothing out: a
    /// no-op, or a first step (the cordon, the drain) that failed.
    fn failed_to_take_out(&self) -> std::collections::HashSet<&str> {
        self.records
            .iter()
            .filter(|r| r.phase == Phase::Outcome)
            .filter(|r| {
                r.outcome
                    .as_ref()
                    .is_some_and(|o| o.no_op || !o.steps.first().map_or(o.ok, |s| s.ok))
            })
            .map(|r| r.id.as_str())
            .collect()
    }

    /// The distinct nodes taken out of service within the window, each
    /// with its latest time on the clock it was counted by, oldest first:
    /// this cluster's intents (cordon, drain: every one whose outcome did
    /// not say it failed to — done, partly done, or in flight), and, when
    /// the window has the snapshot, every node the scheduler says went out
    /// of service in it whoever did it (cordoned, draining, drained or
    /// down, with the time its reason was set: Slurm's
    /// `reason_changed_at`, the kubelet's `NodeNotSchedulable` or
    /// `NodeNotReady` time). A failing domain's remedy cordons are not
    /// counted, nor `except`.
    pub fn taken_out(&self, w: &Window<'_>) -> Vec<(String, i64)> {
        let failed = self.failed_to_take_out();
        let mut latest: std::collections::HashMap<&str, i64> = Default::default();
        let mut remedies: std::collections::HashSet<&str> = Default::default();
        for r in &self.records {
            if r.phase != Phase::Intent
                || !(r.action == "drain" || r.action == "cordon")
                || failed.contains(r.id.as_str())
                || w.except.is_some_and(|n| r.target == n)
                || !w.clusters.contains(&r.cluster.as_str())
            {
                continue;
            }
            let (t, now) = match r.source_time {
                Some(t) => (t, w.source_now),
                None => (r.time, w.wall_now),
            };
            if t < now - w.span_s || t > now {
                continue;
            }
            if r.domain_remedy {
                remedies.insert(r.target.as_str());
                continue;
            }
            let e = latest.entry(r.target.as_str()).or_insert(t);
            *e = (*e).max(t);
        }
        for n in w.scheduler.map(|c| c.nodes.as_slice()).unwrap_or_default() {
            let out = matches!(
                n.state,
                NodeState::Cordoned | NodeState::Draining | NodeState::Drain | NodeState::Down
            );
            let Some(t) = n.reason_time.filter(|_| out) else {
                continue;
            };
            if t < w.source_now - w.span_s
                || t > w.source_now
                || w.except == Some(n.name.as_str())
                || remedies.contains(n.name.as_str())
            {
                continue;
            }
            latest.entry(n.name.as_str()).or_insert(t);
        }
        let mut out: Vec<(String, i64)> = latest
            .into_iter()
            .map(|(n, t)| (n.to_string(), t))
            .collect();
        out.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
        out
    }

    /// The same, leaving out what was done to `except` (an armed plan's
    /// own cordon of the node it will drain).
    pub fn nodes_taken_out_since_except(&self, since: i64, except: Option<&str>) -> u32 {
        let failed = self.failed_to_take_out();
        self.records
            .iter()
            .filter(|r| {
                r.phase == Phase::Intent
                    && r.time >= since
                    && (r.action == "drain" || r.action == "cordon")
                    && !failed.contains(r.id.as_str())
                    && except.is_none_or(|n| r.target != n)
            })
            .count() as u32
    }
}

/// The circuit breaker's window, one rule for what it counts and what it
/// gates (docs/decision-engine.md): this cluster's records (under any of
/// `clusters`), on the source's clock (`source_now`; wall-clock `wall_now`
/// for records without one), `span_s` long; `except` a node not counted
/// (an armed plan's own cordon); `scheduler` the snapshot whose nodes the
/// scheduler says went out of service in the window are counted too.
#[derive(Debug, Clone, Copy)]
pub struct Window<'a> {
    pub clusters: &'a [&'a str],
    pub source_now: i64,
    pub wall_now: i64,
    pub span_s: i64,
    pub except: Option<&'a str>,
    pub scheduler: Option<&'a Cluster>,
}
