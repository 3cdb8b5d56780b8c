//! `nightshift get …`: the current state as a table for people or JSON for
//! scripts. The JSON field names are a stable interface (see README).

use crate::cli::{Format, GetWhat};
use crate::engine::analysis::Base;
use crate::model::{Cluster, Gpu, GpuHealth, Job, Node, NodeState};
use crate::text::sanitize;
use serde::Serialize;

/// Writes to stdout. A closed stdout (`nightshift get … | head -1`) ends
/// the program quietly with status 141, as SIGPIPE ends every Unix tool;
/// any other write error ends it with a one-line error.
pub fn write_out(s: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(s.as_bytes()).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("nightshift: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

/// `println!` for the command line's output: see `write_out`.
#[macro_export]
macro_rules! outln {
    ($($t:tt)*) => { $crate::output::write_out(&format!("{}\n", format_args!($($t)*))) };
}

/// `print!` for the command line's output: see `write_out`.
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => { $crate::output::write_out(&format!($($t)*)) };
}

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
    /// When the scheduler gives a held-back node to the queue again (its
    /// reservation's end).
    #[serde(skip_serializing_if = "Option::is_none")]
    back_at: Option<i64>,
    gpu_model: Option<&'a str>,
    topology: Option<&'a str>,
    domains: &'a [crate::model::Domain],
    ib_ports: &'a [crate::model::IbPort],
    labels: &'a std::collections::BTreeMap<String, String>,
    gpus_total: u32,
    /// Unknown (null) on a node no scheduler knows (`--source none`).
    gpus_allocated: Option<u32>,
    gpus_free: Option<u32>,
    mean_sm_occupancy: Option<f64>,
    /// Its GPUs in aggregate, where a fleet's Prometheus gave only that.
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu_summary: Option<&'a crate::model::GpuSummary>,
    jobs: Vec<&'a str>,
    /// Its hardware faults within `[engine] repeat_offender`'s window
    /// (counts by kind, when, whether that makes it a repeat offender).
    #[serde(skip_serializing_if = "Option::is_none")]
    history: Option<&'a crate::engine::repeat::NodeHistory>,
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

/// Why `get` has nothing to print.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error(transparent)]
    Json(#[from] crate::text::JsonError),
    /// `get kpis` is answered over a window by its own command.
    #[error("kpis are figures over a window: nightshift get kpis")]
    Kpis,
}

impl From<OutputError> for String {
    fn from(e: OutputError) -> String {
        e.to_string()
    }
}

pub fn render(
    c: &Cluster,
    base: &Base,
    what: GetWhat,
    format: Format,
) -> Result<String, OutputError> {
    match format {
        Format::Json => {
            let mut out = Vec::new();
            json(c, base, what, &mut out)?;
            Ok(String::from_utf8(out)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
        }
        Format::Table => Ok(table(c, base, what)),
    }
}

/// [`render`] printed: JSON is written to stdout as it is made, never held
/// whole (a million GPUs' JSON is most of a gigabyte); a closed stdout
/// ends the program as [`write_out`] says.
pub fn print(c: &Cluster, base: &Base, what: GetWhat, format: Format) -> Result<(), OutputError> {
    if format == Format::Table {
        write_out(&table(c, base, what));
        return Ok(());
    }
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    match json(c, base, what, &mut w) {
        Err(OutputError::Json(e)) if e.io_kind().is_some() => {
            if e.io_kind() == Some(std::io::ErrorKind::BrokenPipe) {
                std::process::exit(141);
            }
            eprintln!("nightshift: cannot write to stdout: {e}");
            std::process::exit(1);
        }
        other => other,
    }
}

/// `get … --all`: each cluster's answer under its name, or its error. JSON:
/// `{"kind": "fleet", "clusters": [{"cluster": NAME, "answer": {…}} |
/// {"cluster": NAME, "error": "…"}]}`; a table per cluster under its name.
pub fn fleet(
    answers: &[(String, Result<String, String>)],
    format: Format,
) -> Result<String, OutputError> {
    match format {
        Format::Json => {
            let clusters: Vec<serde_json::Value> = answers
                .iter()
                .map(|(name, a)| match a {
                    Ok(text) => serde_json::json!({
                        "cluster": name,
                        "answer": serde_json::from_str::<serde_json::Value>(text)
                            .unwrap_or(serde_json::Value::String(text.clone())),
                    }),
                    Err(e) => serde_json::json!({"cluster": name, "error": e}),
                })
                .collect();
            Ok(crate::text::json_pretty(
                &serde_json::json!({"kind": "fleet", "clusters": clusters}),
            )?)
        }
        Format::Table => Ok(answers
            .iter()
            .map(|(name, a)| match a {
                Ok(text) => format!("== {} ==\n{}", crate::text::sanitize(name), text.trim_end()),
                Err(e) => format!(
                    "== {} ==\nerror: {}",
                    crate::text::sanitize(name),
                    crate::text::sanitize(e)
                ),
            })
            .collect::<Vec<_>>()
            .join("\n\n")),
    }
}

fn envelope<T: Serialize>(
    c: &Cluster,
    kind: &'static str,
    items: Vec<T>,
    out: &mut dyn std::io::Write,
) -> Result<(), OutputError> {
    let env = Envelope {
        kind,
        cluster: &c.name,
        source: &c.source,
        time: c.time,
        items,
    };
    Ok(crate::text::json_pretty_to(out, &env)?)
}

fn json(
    c: &Cluster,
    base: &Base,
    what: GetWhat,
    out: &mut dyn std::io::Write,
) -> Result<(), OutputError> {
    match what {
        GetWhat::Nodes => {
            // Asking each node for its jobs was nodes × jobs (17 s at 10k × 100k).
            let mut on_node = c.jobs_by_node();
            envelope(
                c,
                "nodes",
                c.nodes
                    .iter()
                    .map(|n| {
                        let jobs = on_node.remove(&n.name).unwrap_or_default();
                        let mut item =
                            node_item(n, jobs.iter().map(|&i| c.jobs[i].id.as_str()).collect());
                        item.history = base.history(&n.name);
                        item
                    })
                    .collect(),
                out,
            )
        }
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
            out,
        ),
        GetWhat::Jobs => {
            let inferred = base.plan.inferred_reasons(c);
            envelope(
                c,
                "jobs",
                c.jobs
                    .iter()
                    .enumerate()
                    .map(|(i, job)| JobItem {
                        job,
                        estimate: base.plan.estimate(i),
                        inferred_reason: inferred.get(i).copied().flatten(),
                    })
                    .collect(),
                out,
            )
        }
        GetWhat::Incidents => envelope(c, "incidents", base.incidents.iter().collect(), out),
        // Figures over a window, not items of a snapshot (main answers them).
        GetWhat::Kpis => Err(OutputError::Kpis),
    }
}

/// A job as the scheduler says it, with the plan's estimate (pending jobs)
/// and the reason the plan itself infers (see `Plan::inferred_reasons`).
#[derive(Serialize)]
struct JobItem<'a> {
    #[serde(flatten)]
    job: &'a Job,
    #[serde(skip_serializing_if = "Option::is_none")]
    estimate: Option<&'a crate::engine::plan::Estimate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inferred_reason: Option<&'static str>,
}

fn node_item<'a>(n: &'a Node, jobs: Vec<&'a str>) -> NodeItem<'a> {
    NodeItem {
        name: &n.name,
        partitions: &n.partitions,
        state: n.state,
        reason: n.reason.as_deref(),
        reason_set_by: n.reason_set_by.as_deref(),
        reason_time: n.reason_time,
        back_at: n.back_at,
        gpu_model: n.gpu_model.as_deref(),
        topology: n.topology(),
        domains: &n.domains,
        ib_ports: &n.ib_ports,
        labels: &n.labels,
        gpus_total: n.gpu_count,
        gpus_allocated: (!n.endpoint_only()).then(|| n.gpus_allocated()),
        gpus_free: (!n.endpoint_only()).then(|| n.gpus_free()),
        mean_sm_occupancy: n.mean_sm_occupancy(),
        gpu_summary: n.gpu_summary.as_ref(),
        jobs,
        history: None,
    }
}

pub use crate::columns::incident_jobs;

/// Left-aligned columns, two spaces apart, every cell sanitised.
/// The widest a padded column gets, in terminal columns: a longer cell (a 10 KB
/// node name) is cut with an ellipsis. The last column is never padded and
/// never cut.
const MAX_CELL: usize = 80;

fn columns(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let last = header.len().saturating_sub(1);
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|r| {
            r.into_iter()
                .enumerate()
                .map(|(i, c)| match sanitize(&c) {
                    s if i < last => crate::text::cut(&s, MAX_CELL).into_owned(),
                    s => s.into_owned(),
                })
                .collect()
        })
        .collect();
    // Columns on the terminal, not chars: `节点-gpu01` is ten wide.
    let cols = crate::text::width;
    let mut width: Vec<usize> = header.iter().map(|h| cols(h)).collect();
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(cols(c));
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        for (i, (c, w)) in cells.iter().zip(&width).enumerate() {
            out.push_str(c);
            if i < last {
                out.push_str(&" ".repeat(w.saturating_sub(cols(c)) + 2));
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

/// The same columns as the console's lists, every one, never cut.
fn spec_table<T>(
    ctx: &crate::columns::Ctx,
    cols: &[crate::columns::Column<T>],
    rows: &[&T],
) -> String {
    columns(
        &cols.iter().map(|c| c.name).collect::<Vec<_>>(),
        rows.iter()
            .map(|r| cols.iter().map(|c| (c.cell)(ctx, r).text).collect())
            .collect(),
    )
}

fn table(c: &Cluster, base: &Base, what: GetWhat) -> String {
    let ctx = crate::columns::Ctx {
        cluster: c,
        base: Some(base),
        stale_after_s: 60,
    };
    match what {
        GetWhat::Nodes => spec_table(
            &ctx,
            crate::columns::NODES,
            &c.nodes.iter().map(|n| &**n).collect::<Vec<_>>(),
        ),
        GetWhat::Gpus => spec_table(
            &ctx,
            crate::columns::GPUS,
            &c.gpus().map(|(_, g)| g).collect::<Vec<_>>(),
        ),
        GetWhat::Jobs => spec_table(
            &ctx,
            crate::columns::JOBS,
            &c.jobs.iter().map(|j| &**j).collect::<Vec<_>>(),
        ),
        GetWhat::Incidents => spec_table(
            &ctx,
            crate::columns::INCIDENTS,
            &base.incidents.iter().collect::<Vec<_>>(),
        ),
        GetWhat::Kpis => "kpis are figures over a window: nightshift get kpis\n".into(),
    }
}

/// The console's first screen as plain text, for a terminal that cannot
/// draw it (`TERM=dumb`): headline numbers and the open incidents.
pub fn plain_overview(c: &Cluster, base: &Base) -> String {
    let s = c.summary();
    let mut out = format!(
        "nightshift: {} ({}) at {}\nGPUs {}  allocated {}  idle {}  unavailable {}\nJobs {} running  {} pending\n\n",
        sanitize(&c.name),
        sanitize(&c.source),
        crate::text::datetime(c.time),
        s.gpus_total,
        s.gpus_allocated,
        s.gpus_idle,
        s.gpus_unavailable,
        s.jobs_running,
        s.jobs_pending
    );
    let ctx = crate::columns::Ctx {
        cluster: c,
        base: Some(base),
        stale_after_s: 60,
    };
    let open: Vec<&crate::engine::incidents::Incident> =
        base.incidents.iter().filter(|i| i.is_open()).collect();
    if open.is_empty() {
        out.push_str("no open incidents\n");
    } else {
        out.push_str(&format!("open incidents ({}):\n", open.len()));
        out.push_str(&spec_table(&ctx, crate::columns::INCIDENTS, &open));
    }
    out.push_str("\nTERM=dumb: no full-screen console here; `nightshift get nodes|gpus|jobs|incidents` and `why`, `blast`, `restore` print the rest.\n");
    out
}

#[cfg(test)]
mod tests {
    /// A cell's width is the columns it takes on a terminal (issue 63: a
    /// host `节点-gpu01` shifted its row by two): every row's second
    /// column starts at the same column; a cell past the bound is cut by
    /// columns too.
    #[test]
    fn columns_pad_by_terminal_width() {
        let t = super::columns(
            &["NODE", "STATE"],
            vec![
                vec!["节点-gpu01".into(), "up".into()],
                vec!["gpu02".into(), "down".into()],
            ],
        );
        let at: Vec<usize> = t
            .lines()
            .map(|l| {
                let i = l.rfind("  ").expect("a gap") + 2;
                crate::text::width(&l[..i])
            })
            .collect();
        assert_eq!(at, [12, 12, 12], "{t}");
        let long = "节".repeat(100);
        assert_eq!(crate::text::width(&crate::text::cut(&long, 80)), 79);
    }
}
