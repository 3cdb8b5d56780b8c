//! `nightshift get …`: the current state as a table for people or JSON for
//! scripts. The JSON field names are a stable interface (see README).

use crate::cli::{Format, GetWhat};
use crate::engine::analysis::Base;
use crate::model::{Cluster, Gpu, GpuHealth, Job, Node, NodeState};
use crate::text::{self, sanitize};
use serde::Serialize;

#[derive(Serialize)]
struct Envelope<'a, T: Serialize> {
    kind: &'static str,
    cluster: &'a str,
    source: &'a str,
    time: i64,
    items: Vec<T>,
}

/// One node with its counts, for `get nodes`.
#[derive(Serialize)]
struct NodeItem<'a> {
    name: &'a str,
    partitions: &'a [String],
    state: NodeState,
    reason: Option<&'a str>,
    reason_set_by: Option<&'a str>,
    reason_time: Option<i64>,
    gpu_model: Option<&'a str>,
    topology: Option<&'a str>,
    labels: &'a std::collections::BTreeMap<String, String>,
    gpus_total: u32,
    gpus_allocated: u32,
    gpus_free: u32,
    mean_sm_occupancy: Option<f64>,
    jobs: Vec<&'a str>,
}

/// One GPU with its node's name and health, for `get gpus`.
#[derive(Serialize)]
struct GpuItem<'a> {
    #[serde(flatten)]
    gpu: &'a Gpu,
    health: GpuHealth,
    /// Seconds since the readings were taken, on the snapshot's clock.
    age_s: Option<i64>,
}

pub fn render(c: &Cluster, base: &Base, what: GetWhat, format: Format) -> Result<String, String> {
    match format {
        Format::Json => json(c, base, what),
        Format::Table => Ok(table(c, base, what)),
    }
}

fn envelope<T: Serialize>(
    c: &Cluster,
    kind: &'static str,
    items: Vec<T>,
) -> Result<String, String> {
    let env = Envelope {
        kind,
        cluster: &c.name,
        source: &c.source,
        time: c.time,
        items,
    };
    serde_json::to_string_pretty(&env).map_err(|e| format!("cannot write JSON: {e}"))
}

fn json(c: &Cluster, base: &Base, what: GetWhat) -> Result<String, String> {
    match what {
        GetWhat::Nodes => envelope(
            c,
            "nodes",
            c.nodes.iter().map(|n| node_item(c, n)).collect(),
        ),
        GetWhat::Gpus => envelope(
            c,
            "gpus",
            c.gpus()
                .map(|(_, g)| GpuItem {
                    gpu: g,
                    health: base.gpu_severity(&g.node, g.index),
                    age_s: g.reading_time.map(|t| (c.time - t).max(0)),
                })
                .collect(),
        ),
        GetWhat::Jobs => envelope(c, "jobs", c.jobs.iter().collect::<Vec<&Job>>()),
        GetWhat::Incidents => envelope(c, "incidents", base.incidents.iter().collect()),
    }
}

fn node_item<'a>(c: &'a Cluster, n: &'a Node) -> NodeItem<'a> {
    NodeItem {
        name: &n.name,
        partitions: &n.partitions,
        state: n.state,
        reason: n.reason.as_deref(),
        reason_set_by: n.reason_set_by.as_deref(),
        reason_time: n.reason_time,
        gpu_model: n.gpu_model.as_deref(),
        topology: n.topology.as_deref(),
        labels: &n.labels,
        gpus_total: n.gpu_count,
        gpus_allocated: n.gpus_allocated(),
        gpus_free: n.gpus_free(),
        mean_sm_occupancy: n.mean_sm_occupancy(),
        jobs: c.jobs_on_node(&n.name).map(|j| j.id.as_str()).collect(),
    }
}

/// `4700(running→pending),4701~` : each job hit, its state then → now,
/// `~` for one hit through its gang.
pub fn incident_jobs(i: &crate::engine::incidents::Incident) -> String {
    if i.jobs.is_empty() {
        return "-".into();
    }
    i.jobs
        .iter()
        .map(|j| {
            let st = |s: Option<crate::model::JobState>| s.map_or("gone", |s| s.as_str());
            let states = match (j.state_then, j.state_now) {
                (Some(a), Some(b)) if a == b => a.as_str().to_string(),
                (then, now) => format!("{}→{}", st(then), st(now)),
            };
            format!("{}{}({states})", j.id, if j.via_gang { "~" } else { "" })
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Left-aligned columns, two spaces apart, every cell sanitised.
fn columns(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|r| r.into_iter().map(|c| sanitize(&c).into_owned()).collect())
        .collect();
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        for (i, (c, w)) in cells.iter().zip(&width).enumerate() {
            out.push_str(c);
            if i < last {
                out.push_str(&" ".repeat(w - c.chars().count() + 2));
            }
        }
        out.push('\n');
    };
    line(header.to_vec());
    for r in &rows {
        line(r.iter().map(String::as_str).collect());
    }
    out
}

fn table(c: &Cluster, base: &Base, what: GetWhat) -> String {
    match what {
        GetWhat::Nodes => columns(
            &[
                "NAME",
                "PARTITION",
                "STATE",
                "GPUS",
                "FREE",
                "SM OCC",
                "LAST XID",
                "REASON",
            ],
            c.nodes
                .iter()
                .map(|n| {
                    vec![
                        n.name.clone(),
                        n.partitions.join(","),
                        n.state.as_str().into(),
                        format!("{}/{}", n.gpus_allocated(), n.gpu_count),
                        n.gpus_free().to_string(),
                        text::percent(n.mean_sm_occupancy()),
                        n.last_xid()
                            .map_or("-".into(), |(g, x)| format!("{} (gpu {g})", x.code)),
                        text::opt(n.reason.as_deref()),
                    ]
                })
                .collect(),
        ),
        GetWhat::Gpus => columns(
            &[
                "NODE",
                "GPU",
                "JOB",
                "SM OCC",
                "UTIL",
                "TEMP",
                "POWER",
                "SBE V/A",
                "DBE V/A",
                "REMAP P/F",
                "XID",
                "HEALTH",
            ],
            c.gpus()
                .map(|(_, g)| {
                    vec![
                        g.node.clone(),
                        g.index.to_string(),
                        text::opt(g.job.as_deref()),
                        text::percent(g.sm_occupancy),
                        text::percent(g.utilization),
                        g.temperature_c.map_or("-".into(), |t| format!("{t:.0}C")),
                        g.power_w.map_or("-".into(), |p| format!("{p:.0}W")),
                        format!(
                            "{}/{}",
                            text::opt(g.ecc.sbe_volatile),
                            text::opt(g.ecc.sbe_aggregate)
                        ),
                        format!(
                            "{}/{}",
                            text::opt(g.ecc.dbe_volatile),
                            text::opt(g.ecc.dbe_aggregate)
                        ),
                        format!(
                            "{}/{}",
                            yes_no(g.row_remap_pending),
                            yes_no(g.row_remap_failed)
                        ),
                        g.last_xid
                            .as_ref()
                            .map_or("-".into(), |x| x.code.to_string()),
                        format!("{:?}", base.gpu_severity(&g.node, g.index)).to_lowercase(),
                    ]
                })
                .collect(),
        ),
        GetWhat::Jobs => columns(
            &[
                "ID",
                "NAME",
                "USER",
                "ACCOUNT",
                "PARTITION",
                "STATE",
                "GPUS",
                "NODES",
                "PRIO",
                "REASON",
            ],
            c.jobs
                .iter()
                .map(|j| {
                    vec![
                        j.id.clone(),
                        j.name.clone(),
                        j.user.clone(),
                        text::opt(j.account.as_deref()),
                        j.partition.clone(),
                        j.state.as_str().into(),
                        text::opt(j.gpus_requested()),
                        if j.nodes.is_empty() {
                            "-".into()
                        } else {
                            j.nodes.join(",")
                        },
                        text::opt(j.priority),
                        text::opt(j.reason.as_deref()),
                    ]
                })
                .collect(),
        ),
        GetWhat::Incidents => columns(
            &[
                "TIME", "NODE", "GPU", "EVENT", "STAGE", "DO", "JOBS", "MESSAGE", "STATUS",
            ],
            base.incidents
                .iter()
                .map(|i| {
                    vec![
                        text::datetime(i.time),
                        i.node.clone(),
                        text::opt(i.gpu),
                        i.label.clone(),
                        i.stage.as_str().into(),
                        i.action.short().into(),
                        incident_jobs(i),
                        i.message.clone(),
                        i.status.clone(),
                    ]
                })
                .collect(),
        ),
    }
}

fn yes_no(b: Option<bool>) -> &'static str {
    match b {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    }
}
