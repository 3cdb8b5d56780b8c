//! A node made again in the memory of an older copy of it. At 10,000
//! nodes a recorded second changes the readings of about a thousand nodes,
//! and each was a fresh clone: two dozen allocations (its name, domains,
//! labels, each GPU's job) and as many frees of the copy it replaced —
//! a third of the report's CPU over an hour (issue 42, measured with
//! perf). The copies a reader is done with are kept by the node's place
//! and written over field by field, the strings and vectors kept.

use crate::model::{Gpu, Node};
use std::sync::Arc;

/// Copies of nodes no snapshot holds any more, by the node's place.
#[derive(Debug, Default)]
pub struct NodePool {
    by_place: Vec<Option<Node>>,
}

impl NodePool {
    /// The copy of the node at `at` that `n` holds, kept when nothing else
    /// holds it (dropped otherwise: another snapshot still reads it).
    pub fn give(&mut self, at: usize, n: Arc<Node>) {
        let Ok(n) = Arc::try_unwrap(n) else {
            return;
        };
        if self.by_place.len() <= at {
            self.by_place.resize_with(at + 1, || None);
        }
        if let Some(slot) = self.by_place.get_mut(at) {
            *slot = Some(n);
        }
    }

    /// A copy of `src`, the node at `at`: made in a kept copy's memory
    /// where there is one.
    pub fn copy_of(&mut self, at: usize, src: &Node) -> Node {
        match self.by_place.get_mut(at).and_then(Option::take) {
            Some(mut n) => {
                copy_into(&mut n, src);
                n
            }
            None => src.clone(),
        }
    }
}

/// `dst` made equal to `src`, its strings and vectors written over where
/// they fit. Every field is named: a new one is a compile error here, not
/// a copy that keeps an old value.
pub fn copy_into(dst: &mut Node, src: &Node) {
    let Node {
        name,
        partitions,
        state,
        reason,
        reason_set_by,
        reason_time,
        back_at,
        boot_time,
        gpu_model,
        domains,
        ib_ports,
        gpu_summary,
        labels,
        gpu_count,
        gpus,
        fault_reports,
    } = dst;
    name.clone_from(&src.name);
    partitions.clone_from(&src.partitions);
    *state = src.state;
    reason.clone_from(&src.reason);
    reason_set_by.clone_from(&src.reason_set_by);
    *reason_time = src.reason_time;
    *back_at = src.back_at;
    *boot_time = src.boot_time;
    gpu_model.clone_from(&src.gpu_model);
    // Compared first: equal nearly always (the same node), and a clone of
    // them allocates every element.
    same_or_clone(domains, &src.domains);
    same_or_clone(ib_ports, &src.ib_ports);
    same_or_clone(gpu_summary, &src.gpu_summary);
    same_or_clone(labels, &src.labels);
    *gpu_count = src.gpu_count;
    if gpus.len() == src.gpus.len() {
        for (d, s) in gpus.iter_mut().zip(&src.gpus) {
            copy_gpu(d, s);
        }
    } else {
        gpus.clone_from(&src.gpus);
    }
    same_or_clone(fault_reports, &src.fault_reports);
}

/// `dst` made `src`, cloned only when they differ.
pub fn same_or_clone<T: PartialEq + Clone>(dst: &mut T, src: &T) {
    if dst != src {
        *dst = src.clone();
    }
}

/// The same shared name kept as it is (no count moved), another one taken.
fn share(dst: &mut Arc<str>, src: &Arc<str>) {
    if !Arc::ptr_eq(dst, src) {
        *dst = Arc::clone(src);
    }
}

fn share_opt(dst: &mut Option<Arc<str>>, src: &Option<Arc<str>>) {
    match (dst.as_mut(), src) {
        (Some(d), Some(s)) => share(d, s),
        _ => dst.clone_from(src),
    }
}

fn copy_gpu(dst: &mut Gpu, src: &Gpu) {
    let Gpu {
        node,
        index,
        uuid,
        model,
        job,
        memory_used_mib,
        memory_total_mib,
        sm_occupancy,
        sm_active,
        utilization,
        temperature_c,
        power_w,
        ecc,
        nvlink,
        nvlink_links,
        row_remap_pending,
        row_remap_failed,
        last_xid,
        recovery_action,
        reading_source,
        reading_time,
        metric_names,
    } = dst;
    share(node, &src.node);
    *index = src.index;
    share_opt(uuid, &src.uuid);
    share_opt(model, &src.model);
    job.clone_from(&src.job);
    *memory_used_mib = src.memory_used_mib;
    *memory_total_mib = src.memory_total_mib;
    *sm_occupancy = src.sm_occupancy;
    *sm_active = src.sm_active;
    *utilization = src.utilization;
    *temperature_c = src.temperature_c;
    *power_w = src.power_w;
    *ecc = src.ecc;
    *nvlink = src.nvlink;
    same_or_clone(nvlink_links, &src.nvlink_links);
    *row_remap_pending = src.row_remap_pending;
    *row_remap_failed = src.row_remap_failed;
    same_or_clone(last_xid, &src.last_xid);
    *recovery_action = src.recovery_action;
    share_opt(reading_source, &src.reading_source);
    *reading_time = src.reading_time;
    *metric_names = src.metric_names;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Domain, FaultReport, GpuSummary, IbPort, LastXid, MetricNames, NodeState, NvLinkErrors,
        RecoveryAction,
    };
    use crate::sources::sim::{Sim, SimConfig};

    /// A node unlike the sim's in every field that can differ.
    fn every_field_other(mut n: Node) -> Node {
        n.name = "elsewhere-17".into();
        n.partitions = vec!["a".into(), "bb".into(), "ccc".into()].into();
        n.state = NodeState::Drain;
        n.reason = Some("Xid 79 on GPU 3".into());
        n.reason_set_by = Some("oncall".into());
        n.reason_time = Some(7);
        n.back_at = Some(8);
        n.boot_time = Some(9);
        n.gpu_model = Some("B200".into());
        n.domains = vec![Domain::new("nvl72", "nvl-domain-4")].into();
        n.ib_ports = vec![IbPort {
            device: "mlx5_9".into(),
            port: 2,
            ..IbPort::default()
        }]
        .into();
        n.gpu_summary = Some(GpuSummary {
            gpus: 4,
            utilization: Some(0.5),
            sm_occupancy: None,
            source: "prometheus".into(),
            time: 11,
        });
        Arc::make_mut(&mut n.labels).insert("extra".into(), "label".into());
        n.gpu_count = 3;
        n.fault_reports = vec![FaultReport {
            source: "condition GpuXidError".into(),
            gpu: Some(1),
            xid: Some(79),
            message: "fell off the bus".into(),
            since: Some(12),
        }];
        for g in &mut n.gpus {
            g.node = "elsewhere-17".into();
            g.index += 100;
            g.uuid = Some("GPU-other".into());
            g.model = None;
            g.job = Some("a-much-longer-job-id-than-before".into());
            g.memory_used_mib = Some(1);
            g.memory_total_mib = None;
            g.sm_occupancy = None;
            g.sm_active = Some(0.25);
            g.utilization = None;
            g.temperature_c = Some(99.0);
            g.power_w = None;
            g.ecc.dbe_volatile = Some(4).into();
            g.nvlink.replay = Some(5).into();
            g.nvlink_links.insert(3, NvLinkErrors::default());
            g.row_remap_pending = Some(true);
            g.row_remap_failed = Some(false);
            g.last_xid = Some(Box::new(LastXid {
                code: 79,
                time: None,
                message: Some("Fatal".into()),
            }));
            g.recovery_action = Some(RecoveryAction::NodeReboot);
            g.reading_source = Some("dcgm http://x".into());
            g.reading_time = Some(13);
            g.metric_names = Some(MetricNames::Dcgm47);
        }
        n.gpus.pop();
        n
    }

    /// Written over a node unlike it in every field (and one with a GPU
    /// fewer), and the other way round, a copy is the node itself.
    #[test]
    fn a_copy_made_over_another_node_is_the_node() {
        let sim = Sim::new(SimConfig::default()).expect("sim");
        let c = sim.snapshot();
        let plain = (*c.nodes[0]).clone();
        let other = every_field_other(plain.clone());
        assert_ne!(plain, other);
        for (from, over) in [(&plain, &other), (&other, &plain)] {
            let mut dst = over.clone();
            copy_into(&mut dst, from);
            assert_eq!(&dst, from);
        }
        // The same GPU count, every GPU field other.
        let mut same_count = other.clone();
        same_count.gpus.push(same_count.gpus[0].clone());
        let mut dst = same_count.clone();
        copy_into(&mut dst, &plain);
        assert_eq!(dst, plain);
    }

    /// A copy given back by its place is written over for the node at
    /// that place; one another snapshot still holds is not kept.
    #[test]
    fn a_pool_keeps_only_copies_nothing_else_holds() {
        let sim = Sim::new(SimConfig::default()).expect("sim");
        let c = sim.snapshot();
        let mut pool = NodePool::default();
        let held = Arc::clone(&c.nodes[3]);
        pool.give(3, Arc::clone(&c.nodes[3]));
        assert!(pool.by_place.get(3).is_none_or(Option::is_none));
        pool.give(5, Arc::new(every_field_other((*held).clone())));
        assert!(pool.by_place[5].is_some());
        let copy = pool.copy_of(5, &c.nodes[5]);
        assert_eq!(copy, *c.nodes[5]);
        assert!(pool.by_place[5].is_none(), "taken");
    }
}
