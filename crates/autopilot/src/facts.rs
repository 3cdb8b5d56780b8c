//! The facts of an incident a policy's `when` reads: the incident itself
//! (kind, Xid, label, catalog action, stage), its node (partitions,
//! failure domains, verdict, the jobs on it, how often it failed), as CEL
//! variables.

use crate::engine::analysis::Base;
use crate::engine::incidents::Incident;
use crate::model::Cluster;
use serde::Serialize;

/// Every variable a `when` may name, with what it is (the docs' table and
/// the error for an unknown name come from here).
pub const VARIABLES: &[(&str, &str)] = &[
    (
        "kind",
        "xid, ecc, nvlink, link, node, stall or domain (a switch, a rack)",
    ),
    ("xid", "the Xid number (0 when not an Xid)"),
    ("label", "`XID 79`, `ECC DBE`, `NODE DOWN`, …"),
    (
        "action",
        "the catalog's remedy class: drain_reset_gpu, drain_reboot, drain_investigate, restart_job, cordon_domain, …",
    ),
    (
        "stage",
        "open, draining, awaiting remedy, remedied, resolved",
    ),
    ("severity", "ok, warn or critical"),
    ("node", "the node (a domain incident: the domain's name)"),
    (
        "gpu",
        "the GPU index (-1 when the incident is not one GPU's)",
    ),
    ("partitions", "the node's partitions"),
    (
        "domains",
        "the failure domains the node is in (switch, rack)",
    ),
    ("domain", "a domain incident's domain (\"\" otherwise)"),
    ("nodes", "the nodes it concerns (a domain's many)"),
    ("jobs", "the jobs it hits (whole gangs)"),
    (
        "verdict",
        "the node's health verdict, as a remedy class (none when healthy)",
    ),
    (
        "repeat",
        "the node's hardware faults within [engine] repeat_offender's window",
    ),
    ("age_s", "seconds since the incident began"),
];

/// One incident's facts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Facts {
    pub kind: String,
    pub xid: i64,
    pub label: String,
    pub action: String,
    pub stage: String,
    pub severity: String,
    pub node: String,
    pub gpu: i64,
    pub partitions: Vec<String>,
    pub domains: Vec<String>,
    pub domain: String,
    pub nodes: Vec<String>,
    pub jobs: Vec<String>,
    pub verdict: String,
    pub repeat: i64,
    pub age_s: i64,
}

impl Facts {
    /// The facts of `i` on `c`.
    pub fn of(i: &Incident, c: &Cluster, base: &Base) -> Facts {
        let node = c.node(&i.node);
        let nodes = if i.nodes.is_empty() {
            vec![i.node.clone()]
        } else {
            i.nodes.clone()
        };
        Facts {
            kind: i.kind.as_str().into(),
            xid: i.xid.map_or(0, i64::from),
            label: i.label.clone(),
            action: i.action.as_str().into(),
            stage: i.stage.as_str().into(),
            severity: serde_json::to_value(i.severity)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            node: i.node.clone(),
            gpu: i.gpu.map_or(-1, i64::from),
            partitions: node.map_or_else(Vec::new, |n| n.partitions.to_vec()),
            domains: node.map_or_else(Vec::new, |n| {
                n.domains.iter().map(|d| d.name.clone()).collect()
            }),
            domain: i
                .domain
                .as_ref()
                .map_or_else(String::new, |d| d.name.clone()),
            nodes,
            jobs: i.jobs.iter().map(|j| j.id.clone()).collect(),
            verdict: base
                .node_verdict(&i.node)
                .map_or("none", |v| v.verdict.action.as_str())
                .into(),
            repeat: base
                .histories
                .get(&i.node)
                .map_or(0, |h| h.faults.iter().map(|f| i64::from(f.count)).sum()),
            age_s: (c.time - i.time).max(0),
        }
    }

    /// A typical incident: a `when` is tried on it when the policies are
    /// loaded, so one that cannot give true or false is refused then.
    pub fn example() -> Facts {
        Facts {
            kind: "xid".into(),
            xid: 79,
            label: "XID 79".into(),
            action: "drain_reset_gpu".into(),
            stage: "open".into(),
            severity: "critical".into(),
            node: "gpu01".into(),
            gpu: 3,
            partitions: vec!["gpu".into()],
            domains: vec!["leaf1".into()],
            domain: String::new(),
            nodes: vec!["gpu01".into()],
            jobs: vec!["1001".into()],
            verdict: "drain_reset_gpu".into(),
            repeat: 1,
            age_s: 5,
        }
    }

    /// The facts as CEL variables: numbers as CEL's `int` (so `xid + 1`
    /// and `repeat >= 2` read as written), strings, lists of strings.
    pub fn context(&self) -> cel::Context<'static, 'static> {
        let mut ctx = cel::Context::default();
        let mut errors = Vec::new();
        let mut text = |ctx: &mut cel::Context<'static, 'static>, k: &str, v: &str| {
            if let Err(e) = ctx.add_variable(k, v.to_string()) {
                errors.push(format!("{k}: {e}"));
            }
        };
        text(&mut ctx, "kind", &self.kind);
        text(&mut ctx, "label", &self.label);
        text(&mut ctx, "action", &self.action);
        text(&mut ctx, "stage", &self.stage);
        text(&mut ctx, "severity", &self.severity);
        text(&mut ctx, "node", &self.node);
        text(&mut ctx, "domain", &self.domain);
        text(&mut ctx, "verdict", &self.verdict);
        for (k, v) in [
            ("xid", self.xid),
            ("gpu", self.gpu),
            ("repeat", self.repeat),
            ("age_s", self.age_s),
        ] {
            if let Err(e) = ctx.add_variable(k, v) {
                errors.push(format!("{k}: {e}"));
            }
        }
        for (k, v) in [
            ("partitions", &self.partitions),
            ("domains", &self.domains),
            ("nodes", &self.nodes),
            ("jobs", &self.jobs),
        ] {
            if let Err(e) = ctx.add_variable(k, v.clone()) {
                errors.push(format!("{k}: {e}"));
            }
        }
        for e in errors {
            tracing::warn!("autopilot: a fact is not a CEL value: {e}");
        }
        ctx
    }
}
