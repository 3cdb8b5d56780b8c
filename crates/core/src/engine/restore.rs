//! How long until a job is back where it was, and what it loses.
//!
//! total = requeue wait + start-up + state load, where
//! state load = checkpoint bytes ÷ min(storage read bandwidth,
//! nodes × per-node read bandwidth), and lost work = time since the last
//! checkpoint × the job's GPUs. Every term says where its number came from.

use super::base::Base;
use super::plan::{Estimate, Plan, plan};
use super::{Provenance, SiteParams, whatif};
use crate::model::{Cluster, Job, Timestamp};
use crate::text;
use serde::Serialize;

/// A number with its provenance and a short note; `value` is `None` when
/// unknown, and the note says why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Quantity {
    pub value: Option<f64>,
    pub source: Provenance,
    pub note: String,
}

impl Quantity {
    fn known(value: f64, source: Provenance, note: impl Into<String>) -> Quantity {
        Quantity {
            value: Some(value),
            source,
            note: note.into(),
        }
    }

    fn unknown(source: Provenance, note: impl Into<String>) -> Quantity {
        Quantity {
            value: None,
            source,
            note: note.into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Restore {
    pub job: Option<String>,
    pub gpus: Option<u32>,
    pub nodes: u32,
    /// Seconds of work since the last checkpoint.
    pub lost_work_s: Quantity,
    pub lost_gpu_hours: Quantity,
    /// Only when a GPU-hour price is configured.
    pub lost_cost: Option<Quantity>,
    pub state_bytes: Quantity,
    /// Effective read bandwidth for the state load, bytes/s.
    pub read_bw: Quantity,
    pub load_s: Quantity,
    pub requeue_wait_s: Quantity,
    pub startup_s: Quantity,
    /// requeue wait + start-up + load (+ the checkpoint write under a
    /// grace period).
    pub total_s: Quantity,
    /// Soft preemption: what the grace period changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace: Option<Grace>,
}

/// A preemption with a grace period: the job is signalled, writes its
/// checkpoint, then stops. Lost work is the write (or the time since its
/// last checkpoint, when that is shorter: it need not write again), if the
/// write fits in the grace period; else the hard numbers stand.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Grace {
    pub grace_s: u64,
    /// Seconds the checkpoint write takes.
    pub write_s: Quantity,
    /// Whether the write fits in the grace period; `None` when unknown.
    pub fits: Option<bool>,
    pub note: String,
}

/// The requeue wait as the queue model sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Wait {
    /// The what-if form: no queue, so no wait in the total (said so).
    #[default]
    NotModelled,
    /// Seconds until it starts again, and how that was found.
    Known(i64, String),
    /// It cannot start again on the capacity in service: the total is
    /// unknown too, and the note says what it waits for.
    Unknown(String),
}

/// Inputs of the restore model, for the what-if form and for jobs alike.
#[derive(Debug, Clone, Default)]
pub struct RestoreInput {
    pub gpus: Option<u32>,
    pub nodes: u32,
    /// (seconds since the last checkpoint, where that came from, note)
    pub since_checkpoint: Option<(i64, Provenance, String)>,
    pub state_bytes: Option<u64>,
    pub params: Option<u64>,
    pub state_source: Provenance,
    pub requeue_wait: Wait,
    /// Bandwidths given on the command line replace the site's.
    pub storage_bw: Option<f64>,
    pub node_bw: Option<f64>,
}

pub fn compute(input: &RestoreInput, site: &SiteParams) -> Restore {
    let lost_work_s = match &input.since_checkpoint {
        Some((s, src, note)) => Quantity::known(*s as f64, *src, note.clone()),
        None => Quantity::unknown(Provenance::Assumption, "not running: nothing to lose"),
    };
    let lost_gpu_hours = match (lost_work_s.value, input.gpus) {
        (Some(s), Some(g)) => Quantity::known(
            s / 3600.0 * f64::from(g),
            lost_work_s.source,
            format!("{} × {g} GPUs", text::duration(s as i64)),
        ),
        (Some(_), None) => Quantity::unknown(Provenance::Assumption, "GPU count unknown"),
        (None, _) => Quantity::known(0.0, Provenance::Model, "nothing running"),
    };
    let lost_cost = site.gpu_hour_price.map(|p| match lost_gpu_hours.value {
        Some(h) => Quantity::known(
            h * p,
            Provenance::SiteDefault,
            format!("{h:.1} GPU-hours × {p} per GPU-hour"),
        ),
        None => Quantity::unknown(Provenance::SiteDefault, "GPU-hours unknown"),
    });
    let state_bytes = state_size(input, site);
    let nodes = input.nodes.max(1);
    let (read_bw, storage) = read_bandwidth(input, site, nodes);
    let bw = read_bw.value.unwrap_or(storage);
    let load_s = match state_bytes.value {
        Some(b) => Quantity::known(
            b / bw,
            Provenance::Model,
            format!("{} ÷ {}/s", text::bytes(b as u64), text::bytes(bw as u64)),
        ),
        None => Quantity::unknown(Provenance::Assumption, "checkpoint size unknown"),
    };
    let requeue_wait_s = match &input.requeue_wait {
        Wait::Known(s, note) => Quantity::known(*s as f64, Provenance::Model, note.clone()),
        Wait::Unknown(note) => Quantity::unknown(Provenance::Model, note.clone()),
        Wait::NotModelled => Quantity::unknown(
            Provenance::Assumption,
            "not modelled: a what-if has no queue",
        ),
    };
    let startup_s = Quantity::known(
        site.startup_s as f64,
        Provenance::SiteDefault,
        "container start, NCCL init",
    );
    // A total with an unknown term is unknown, never a smaller number.
    let total_s = total(&input.requeue_wait, &requeue_wait_s, &load_s, site);
    Restore {
        job: None,
        gpus: input.gpus,
        nodes,
        lost_work_s,
        lost_gpu_hours,
        lost_cost,
        state_bytes,
        read_bw,
        load_s,
        requeue_wait_s,
        startup_s,
        total_s,
        grace: None,
    }
}

/// The checkpoint's size: reported, else the parameter count × bytes per
/// parameter, else unknown.
fn state_size(input: &RestoreInput, site: &SiteParams) -> Quantity {
    match (input.state_bytes, input.params) {
        (Some(b), _) => Quantity::known(b as f64, input.state_source, text::bytes(b)),
        (None, Some(p)) => {
            let b = p.saturating_mul(site.bytes_per_param);
            Quantity::known(
                b as f64,
                Provenance::Model,
                format!(
                    "{} parameters × {} bytes (mixed-precision Adam) = {}",
                    p,
                    site.bytes_per_param,
                    text::bytes(b)
                ),
            )
        }
        (None, None) => Quantity::unknown(
            Provenance::Assumption,
            "unknown: the job reports no checkpoint size or parameter count (comment ckpt_bytes=… or ckpt_params=…)",
        ),
    }
}

/// The read bandwidth: the bottleneck of storage and the nodes' network
/// (given, else the site's); and the storage's.
fn read_bandwidth(input: &RestoreInput, site: &SiteParams, nodes: u32) -> (Quantity, f64) {
    let (storage, storage_src) = match input.storage_bw {
        Some(b) => (b, Provenance::Given),
        None => (site.storage_read_bw, Provenance::SiteDefault),
    };
    let (per_node, node_src) = match input.node_bw {
        Some(b) => (b, Provenance::Given),
        None => (site.node_read_bw, Provenance::SiteDefault),
    };
    let node_total = per_node * f64::from(nodes);
    let read_bw = if storage <= node_total {
        Quantity::known(
            storage,
            storage_src,
            format!(
                "storage read {}/s is the bottleneck (nodes could take {}/s)",
                text::bytes(storage as u64),
                text::bytes(node_total as u64)
            ),
        )
    } else {
        Quantity::known(
            node_total,
            node_src,
            format!(
                "{nodes} nodes × {}/s is the bottleneck (storage gives {}/s)",
                text::bytes(per_node as u64),
                text::bytes(storage as u64)
            ),
        )
    };
    (read_bw, storage)
}

/// Requeue wait + start-up + state load; a total with an unknown term is
/// unknown, never a smaller number.
fn total(wait: &Wait, requeue_wait_s: &Quantity, load_s: &Quantity, site: &SiteParams) -> Quantity {
    match (wait, requeue_wait_s.value, load_s.value) {
        (Wait::Unknown(note), _, _) => Quantity::unknown(Provenance::Model, note.clone()),
        (_, Some(w), Some(l)) => Quantity::known(
            w + site.startup_s as f64 + l,
            Provenance::Model,
            "requeue wait + start-up + state load",
        ),
        (Wait::NotModelled, None, Some(l)) => Quantity::known(
            site.startup_s as f64 + l,
            Provenance::Model,
            "start-up + state load (a what-if: no requeue wait)",
        ),
        (_, Some(w), None) => Quantity::unknown(
            Provenance::Assumption,
            format!(
                "the checkpoint size is unknown (at least {} of wait and start-up)",
                text::duration((w + site.startup_s as f64) as i64)
            ),
        ),
        (_, None, _) => Quantity::unknown(Provenance::Assumption, "the checkpoint size is unknown"),
    }
}

fn state_of(job: &Job, site: &SiteParams) -> Option<(u64, Provenance)> {
    match (job.checkpoint.size_bytes.get(), job.checkpoint.params.get()) {
        (Some(b), _) => Some((b, Provenance::JobMetadata)),
        (None, Some(p)) => Some((p.saturating_mul(site.bytes_per_param), Provenance::Model)),
        (None, None) => None,
    }
}

/// How long `job` takes to write its checkpoint: state ÷ min(storage write
/// bandwidth, nodes × per-node bandwidth).
pub fn write_time(job: &Job, site: &SiteParams) -> Quantity {
    let Some((bytes, _)) = state_of(job, site) else {
        return Quantity::unknown(
            Provenance::Assumption,
            "checkpoint size unknown (comment ckpt_bytes=… or ckpt_params=…)",
        );
    };
    let nodes = job
        .node_count
        .unwrap_or(job.nodes.len().max(1) as u32)
        .max(1);
    let node_total = site.node_read_bw * f64::from(nodes);
    let bw = site.storage_write_bw.min(node_total);
    if bw.is_nan() || bw <= 0.0 {
        return Quantity::unknown(Provenance::SiteDefault, "write bandwidth is zero");
    }
    Quantity::known(
        bytes as f64 / bw,
        Provenance::Model,
        format!(
            "{} ÷ {}/s ({})",
            text::bytes(bytes),
            text::bytes(bw as u64),
            if site.storage_write_bw <= node_total {
                "storage write"
            } else {
                "nodes' bandwidth"
            }
        ),
    )
}

/// The restore of a job preempted with a grace period of `grace_s`.
/// A hung job (stalled in a collective) cannot write one: the hard
/// numbers stand.
pub fn with_grace(
    mut r: Restore,
    job: &Job,
    grace_s: u64,
    hung: bool,
    site: &SiteParams,
) -> Restore {
    let write_s = write_time(job, site);
    let (fits, note) = match write_s.value {
        _ if hung => (
            Some(false),
            format!(
                "job {} is hung: it cannot write a checkpoint, the hard numbers stand",
                job.id
            ),
        ),
        Some(w) if w <= grace_s as f64 => (
            Some(true),
            format!(
                "the checkpoint write ({}) fits in the {} grace period",
                text::duration(w.ceil() as i64),
                text::duration(grace_s as i64)
            ),
        ),
        Some(w) => (
            Some(false),
            format!(
                "the checkpoint write ({}) does not fit in the {} grace period: the hard numbers stand",
                text::duration(w.ceil() as i64),
                text::duration(grace_s as i64)
            ),
        ),
        None => (
            None,
            "the checkpoint write time is unknown: the hard numbers stand".to_string(),
        ),
    };
    if let (Some(true), Some(w)) = (fits, write_s.value) {
        let lost = r.lost_work_s.value.map_or(w, |s| s.min(w));
        let gpus = r.gpus;
        r.lost_work_s = Quantity::known(
            lost,
            Provenance::Model,
            if lost < w {
                "its last checkpoint is fresher than a write: it stops without writing".to_string()
            } else {
                format!(
                    "the checkpoint write under the grace period: {}",
                    write_s.note
                )
            },
        );
        r.lost_gpu_hours = match gpus {
            Some(g) => Quantity::known(
                lost / 3600.0 * f64::from(g),
                Provenance::Model,
                format!("{} × {g} GPUs", text::duration(lost.ceil() as i64)),
            ),
            None => Quantity::unknown(Provenance::Assumption, "GPU count unknown"),
        };
        if let Some(p) = site.gpu_hour_price {
            r.lost_cost = Some(match r.lost_gpu_hours.value {
                Some(h) => Quantity::known(
                    h * p,
                    Provenance::SiteDefault,
                    format!("{h:.1} GPU-hours × {p} per GPU-hour"),
                ),
                None => Quantity::unknown(Provenance::SiteDefault, "GPU-hours unknown"),
            });
        }
        if let Some(t) = r.total_s.value {
            r.total_s = Quantity::known(
                t + w,
                Provenance::Model,
                format!("checkpoint write + {}", r.total_s.note),
            );
        }
    }
    r.grace = Some(Grace {
        grace_s,
        write_s,
        fits,
        note,
    });
    r
}

/// Since when a job's work is unsaved: the later of its last checkpoint
/// and its (re)start (a job restarted from a checkpoint has not lost what
/// came before it). The one definition of GPU-hours lost: its GPUs × the
/// time from here to when its work is thrown away (it fails, is requeued
/// or preempted; a hung job, now). docs/decision-engine.md.
pub fn unsaved_since(job: &Job) -> Option<Timestamp> {
    match (job.checkpoint.last.get(), job.start_time.get()) {
        (Some(c), Some(s)) => Some(c.max(s)),
        (c, s) => c.or(s),
    }
}

/// GPU-hours lost by `job` if its work is thrown away at `until`: its GPUs
/// × the time since [`unsaved_since`]. `None` when either is unknown.
pub fn lost_gpu_hours(job: &Job, until: Timestamp) -> Option<f64> {
    let from = unsaved_since(job)?;
    let gpus = job.gpus_requested()?;
    Some((until - from).max(0) as f64 / 3600.0 * f64::from(gpus))
}

/// What the restore model knows about a running job at `now`.
fn input_for(job: &Job, now: i64) -> RestoreInput {
    let since = if job.state.holds_resources() {
        // Which of the checkpoint and the (re)start [`unsaved_since`] chose.
        let (provenance, note) = match (job.checkpoint.last.get(), job.start_time.get()) {
            (Some(t), Some(s)) if s > t => (
                Provenance::JobMetadata,
                "since it (re)started from its last checkpoint",
            ),
            (Some(_), _) => (Provenance::JobMetadata, "since the last checkpoint"),
            _ => (
                Provenance::Assumption,
                "no checkpoint known: counted from the job's start",
            ),
        };
        unsaved_since(job).map(|t| ((now - t).max(0), provenance, note.to_string()))
    } else {
        None
    };
    RestoreInput {
        gpus: job.gpus_requested(),
        nodes: job.node_count.unwrap_or(job.nodes.len().max(1) as u32),
        since_checkpoint: since,
        state_bytes: job.checkpoint.size_bytes.get(),
        params: job.checkpoint.params.get(),
        state_source: Provenance::JobMetadata,
        ..RestoreInput::default()
    }
}

/// Restore for `job` as it runs in `before`, given the snapshot and plan
/// after the action that ends it (in which it is pending again).
pub fn restore_after(
    job: &Job,
    now: i64,
    after: &Cluster,
    plan_after: &Plan,
    site: &SiteParams,
) -> Restore {
    let mut input = input_for(job, now);
    let idx = after.jobs.iter().position(|j| j.id == job.id);
    input.requeue_wait = match idx.and_then(|i| plan_after.estimate(i)) {
        Some(Estimate::Starts { start, nodes }) => Wait::Known(
            (*start - now).max(0),
            format!("queue model: fits again on {}", nodes.join(",")),
        ),
        Some(Estimate::Blocked { reason }) => {
            Wait::Unknown(format!("cannot restart while {reason}"))
        }
        Some(Estimate::NoFit {
            reason, waits_for, ..
        }) => Wait::Unknown(Estimate::no_fit_text(reason, waits_for, "restart")),
        None => Wait::Unknown("the queue model has no estimate for it".into()),
    };
    let mut r = compute(&input, site);
    r.job = Some(job.id.clone());
    r
}

/// Restore for `job` if it were requeued now (with its gang), on the
/// capacity `base` counts: in service and healthy.
pub fn restore(c: &Cluster, base: &Base, job: usize, site: &SiteParams) -> Option<Restore> {
    restore_on(c, &base.unusable, job, site)
}

/// [`restore`] given only the nodes the base holds unusable.
pub fn restore_on(
    c: &Cluster,
    unusable: &super::plan::Unusable,
    job: usize,
    site: &SiteParams,
) -> Option<Restore> {
    let j = c.jobs.get(job)?;
    let (after, _) = whatif::end_job(c, job, true);
    let p = plan(&after, site, unusable);
    Some(restore_after(j, c.time, &after, &p, site))
}

/// The plan of a what-if snapshot, on the same health as `base`.
pub fn plan_after(after: &Cluster, base: &Base, site: &SiteParams) -> Plan {
    plan(after, site, &base.unusable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fixture::*;

    fn base_of(c: &Cluster) -> Base {
        Base::compute(
            c,
            None,
            &SiteParams::default(),
            &crate::engine::xid::XidCatalog::default(),
        )
    }

    fn what_if(bytes: u64, read_bw: f64, nodes: u32, node_bw: Option<f64>) -> Restore {
        let input = RestoreInput {
            nodes,
            state_bytes: Some(bytes),
            state_source: Provenance::Given,
            storage_bw: Some(read_bw),
            node_bw,
            ..RestoreInput::default()
        };
        compute(&input, &SiteParams::default())
    }

    proptest::proptest! {
        #[test]
        fn restore_grows_with_state_and_shrinks_with_bandwidth(
            bytes in 1u64..10_000_000_000_000,
            more in 1u64..1_000_000_000_000,
            bw in 1e8f64..1e11,
            faster in 1.01f64..10.0,
            nodes in 1u32..64,
        ) {
            let base = what_if(bytes, bw, nodes, Some(25e9)).load_s.value.unwrap_or(f64::NAN);
            let bigger = what_if(bytes + more, bw, nodes, Some(25e9)).load_s.value.unwrap_or(f64::NAN);
            let quicker = what_if(bytes, bw * faster, nodes, Some(25e9 * faster)).load_s.value.unwrap_or(f64::NAN);
            proptest::prop_assert!(bigger > base);
            proptest::prop_assert!(quicker < base);
        }
    }

    /// A job that started at 12:50 with its last checkpoint at 12:20 has
    /// not lost 30 minutes of work: it restored from that checkpoint.
    #[test]
    fn work_lost_counts_from_the_later_of_the_checkpoint_and_the_restart() {
        let mut c = cluster();
        add_node(&mut c, "n1", "p", 8);
        let j = run(&mut c, "1", &["n1"], 8, 600, 7200);
        std::sync::Arc::make_mut(&mut c.jobs[j]).checkpoint.last = Some(NOW - 1800).into();
        let r = restore(&c, &base_of(&c), j, &SiteParams::default()).expect("restore");
        let lost = r.lost_gpu_hours.value.expect("known");
        assert!((lost - 8.0 * 600.0 / 3600.0).abs() < 1e-9, "{lost}");
        // Checkpointed since it started: from the checkpoint.
        std::sync::Arc::make_mut(&mut c.jobs[j]).checkpoint.last = Some(NOW - 300).into();
        let r = restore(&c, &base_of(&c), j, &SiteParams::default()).expect("restore");
        let lost = r.lost_gpu_hours.value.expect("known");
        assert!((lost - 8.0 * 300.0 / 3600.0).abs() < 1e-9, "{lost}");
    }

    #[test]
    fn the_seed_case_1_2_tb_at_10_gb_s_loads_in_120_s() {
        let r = what_if(1_200_000_000_000, 10e9, 4, Some(25e9));
        assert_eq!(r.load_s.value, Some(120.0));
        assert_eq!(r.read_bw.source, Provenance::Given);
        // One node at 2 GB/s is the bottleneck instead.
        let r = what_if(1_200_000_000_000, 10e9, 1, Some(2e9));
        assert_eq!(r.load_s.value, Some(600.0));
        assert!(r.read_bw.note.contains("1 nodes"));
    }

    #[test]
    fn unknown_size_is_said_not_guessed() {
        let mut c = cluster();
        add_node(&mut c, "n1", "p", 8);
        let j = run(&mut c, "r", &["n1"], 8, 3600, 7200);
        let r = restore(&c, &base_of(&c), j, &SiteParams::default()).expect("restore");
        assert_eq!(r.state_bytes.value, None);
        assert!(r.state_bytes.note.contains("unknown"));
        assert_eq!(r.total_s.value, None);
        assert_eq!(
            r.lost_work_s.source,
            Provenance::Assumption,
            "no checkpoint: from the start, said so"
        );
        assert_eq!(r.lost_gpu_hours.value, Some(8.0));
        // From parameters: 70B × 16 bytes.
        std::sync::Arc::make_mut(&mut c.jobs[j]).checkpoint.params = Some(70_000_000_000).into();
        let r = restore(&c, &base_of(&c), j, &SiteParams::default()).expect("restore");
        assert_eq!(r.state_bytes.value, Some(1.12e12));
        assert_eq!(r.state_bytes.source, Provenance::Model);
    }

    #[test]
    fn a_requeued_job_waits_for_its_shape() {
        let mut c = cluster();
        add_node(&mut c, "n1", "p", 8);
        add_node(&mut c, "n2", "p", 8);
        let j = run(&mut c, "r", &["n1"], 8, 600, 7200);
        std::sync::Arc::make_mut(&mut c.jobs[j]).checkpoint.last = Some(NOW - 300).into();
        std::sync::Arc::make_mut(&mut c.jobs[j])
            .checkpoint
            .size_bytes = Some(100_000_000_000).into();
        // n2 is busy for another 1000 s; n1 frees when the job is requeued.
        run(&mut c, "other", &["n2"], 8, 0, 1000);
        let r = restore(&c, &base_of(&c), j, &SiteParams::default()).expect("restore");
        assert_eq!(
            r.requeue_wait_s.value,
            Some(0.0),
            "its own node frees at once"
        );
        assert_eq!(r.lost_work_s.value, Some(300.0));
        assert_eq!(r.load_s.value, Some(10.0));
        assert_eq!(r.total_s.value, Some(0.0 + 300.0 + 10.0));
    }
}
