//! The incidents the audit log's intents answer, as a node's history:
//! how an intent names its incident and its fault, and the console's
//! snapshots given the faults nightshift was used to act on.

use super::AuditLog;
use std::sync::Arc;

/// How an intent names the incident it answers: `ID LABEL on NODE[ GPU
/// N] (STAGE)` — read back as a fault of the node's history by
/// `fault_of_incident`.
pub fn incident_line(i: &crate::engine::incidents::Incident) -> String {
    format!(
        "{} {} on {}{} ({})",
        i.id,
        i.label,
        i.node,
        i.gpu.map_or(String::new(), |g| format!(" GPU {g}")),
        i.stage.as_str()
    )
}

/// The hardware fault an incident is, as data: an Xid (`XID 79`), an
/// uncorrectable ECC error or a failed row remap on its node and GPU, at
/// the incident's first time; other incidents (a stall, a link, a domain)
/// are no GPU's fault.
pub fn fault_of(i: &crate::engine::incidents::Incident) -> Option<crate::model::PastFault> {
    use crate::model::Fault;
    let fault = if let Some(x) = i.xid {
        Fault::Xid(x)
    } else if i.label.starts_with("ECC DBE") {
        Fault::Dbe
    } else if i.label.starts_with("REMAP FAIL") {
        Fault::RemapFailed
    } else {
        return None;
    };
    Some(crate::model::PastFault {
        time: i.time,
        node: i.node.clone(),
        gpu: i.gpu,
        fault,
        from: "audit".into(),
    })
}

/// The fault an audit record's incident names (`incident_line`), LABEL an Xid (`XID 79`, `XID 48 (+ECC DBE)`), `ECC DBE` or
/// `REMAP FAIL`; other incidents (a stall, a link) are not a GPU's fault.
pub(super) fn fault_of_incident(incident: &str, time: i64) -> Option<crate::model::PastFault> {
    use crate::model::Fault;
    let (_, rest) = incident.split_once(' ')?;
    let (label, place) = rest.rsplit_once(" on ")?;
    let fault = if let Some(x) = label.strip_prefix("XID ") {
        Fault::Xid(x.split_whitespace().next()?.parse().ok()?)
    } else if label.starts_with("ECC DBE") {
        Fault::Dbe
    } else if label.starts_with("REMAP FAIL") {
        Fault::RemapFailed
    } else {
        return None;
    };
    let place = place.split(" (").next()?;
    let (node, gpu) = match place.split_once(" GPU ") {
        Some((n, g)) => (n, g.trim().parse().ok()),
        None => (place, None),
    };
    Some(crate::model::PastFault {
        time,
        node: node.to_string(),
        gpu,
        fault,
        from: "audit".into(),
    })
}

/// The audit log's faults, by the cluster each was recorded under, kept
/// current: read now, then again whenever the log has grown (looked at
/// each second). The console's analyst gives its cluster's to the
/// analysis beside each snapshot (`analyst::AuditFeed`): a node's history
/// includes what nightshift was used to act on, and no snapshot is
/// rewritten for it.
pub fn watch_faults(
    log: AuditLog,
) -> tokio::sync::watch::Receiver<Arc<crate::protocol::source::Audited>> {
    let mut seen = log_len(&log);
    let (tx, rx) = tokio::sync::watch::channel(Arc::new(log.reading().faults_by_cluster()));
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(1));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            every.tick().await;
            if tx.is_closed() {
                return;
            }
            let now = log_len(&log);
            if now == seen {
                continue;
            }
            seen = now;
            let l = log.clone();
            let faults = tokio::task::spawn_blocking(move || l.reading().faults_by_cluster())
                .await
                .unwrap_or_default();
            tx.send_replace(Arc::new(faults));
        }
    });
    rx
}

/// The log's length now (0 when it is not there).
pub fn log_len(log: &AuditLog) -> u64 {
    std::fs::metadata(&log.path).map_or(0, |m| m.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{Reading, Record};
    use crate::model::Fault;

    #[test]
    fn an_intents_incident_is_a_fault_of_its_node() {
        let f = fault_of_incident("e2 XID 79 on h100-03 GPU 3 (open)", 100).expect("fault");
        assert_eq!(
            (f.node.as_str(), f.gpu, f.fault, f.time),
            ("h100-03", Some(3), Fault::Xid(79), 100)
        );
        let f = fault_of_incident(
            "e5 XID 48 (+ECC DBE, XID 63) on h100-06 GPU 5 (remedied)",
            1,
        )
        .expect("fault");
        assert_eq!(f.fault, Fault::Xid(48));
        let f = fault_of_incident("e7 ECC DBE on gpu-on-x GPU 1 (open)", 1).expect("fault");
        assert_eq!((f.node.as_str(), f.fault), ("gpu-on-x", Fault::Dbe));
        assert!(fault_of_incident("e3 STALL on h100-01 (open)", 1).is_none());
        assert!(fault_of_incident("garbage", 1).is_none());
    }

    /// Repeat offenders are counted by the fault as data (issue 37): three
    /// drains of a100n1 from three command-line runs each recorded "e1 XID
    /// 79 on a100n1 GPU 2" — the label's number restarts in every process —
    /// and were one fault; as data (node, GPU, kind, first time) they are
    /// three, and one incident acted on twice is still one.
    #[test]
    fn faults_are_told_apart_by_their_identity_not_their_label() {
        let at = |id: &str, since: i64| Record {
            id: id.into(),
            phase: crate::model::Phase::Intent,
            time: since + 60,
            operator: "oncall".into(),
            host: "h".into(),
            cluster: "lab".into(),
            source: "slurm".into(),
            action: "drain".into(),
            target: "a100n1".into(),
            preview: "p".into(),
            incident: Some("e1 XID 79 on a100n1 GPU 2 (open)".into()),
            fault: Some(crate::model::PastFault {
                time: since,
                node: "a100n1".into(),
                gpu: Some(2),
                fault: Fault::Xid(79),
                from: "audit".into(),
            }),
            ..Record::default()
        };
        let reading = Reading {
            records: vec![
                at("a", 1000),
                at("b", 90_000),
                at("c", 200_000),
                at("d", 200_000),
            ],
            ..Reading::default()
        };
        let faults = reading.faults(&["lab"]);
        assert_eq!(faults.len(), 3, "{faults:?}");
        assert_eq!(faults[0].time, 1000, "the fault's own time");
    }

    /// The console's analysis gets the audit log's faults of its own
    /// cluster (by the name it is audited under), re-read when the log
    /// grows.
    #[test]
    fn the_analysis_gains_its_own_clusters_audited_faults() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = AuditLog::new(dir.path().join("audit.jsonl"));
        let intent = |id: &str, cluster: &str, node: &str| Record {
            id: id.into(),
            phase: crate::model::Phase::Intent,
            time: 100,
            operator: "oncall".into(),
            host: "h".into(),
            cluster: cluster.into(),
            source: "slurm".into(),
            action: "drain".into(),
            target: node.into(),
            preview: "p".into(),
            incident: Some(format!("e1 XID 79 on {node} GPU 3 (open)")),
            ..Record::default()
        };
        log.write(&intent("a", "west", "gpu01")).expect("write");
        log.write(&intent("b", "east", "gpu02")).expect("write");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        rt.block_on(async {
            let watched = watch_faults(log.clone());
            let nodes =
                |w: &tokio::sync::watch::Receiver<Arc<crate::protocol::source::Audited>>| {
                    crate::protocol::source::audited_for(&w.borrow(), Some("west"), "slurm-west")
                        .into_iter()
                        .map(|f| f.node)
                        .collect::<Vec<_>>()
                };
            assert_eq!(nodes(&watched), ["gpu01"]);
            log.write(&intent("c", "slurm-west", "gpu03"))
                .expect("write");
            let mut w = watched.clone();
            tokio::time::timeout(std::time::Duration::from_secs(5), w.changed())
                .await
                .expect("re-read within 5 s")
                .expect("watch");
            assert_eq!(nodes(&watched), ["gpu01", "gpu03"]);
        });
    }
}
