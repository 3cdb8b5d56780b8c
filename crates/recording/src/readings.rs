//! A node whose GPU readings alone changed, said as those readings
//! (format version 3).
//!
//! At 10,000 nodes the sim reads a tenth of its nodes every second: a
//! thousand nodes of 4.9 KB of JSON each, of which only the six numbers a
//! GPU reading brings change (its time, power, temperature, utilization,
//! SM activity and occupancy). Written whole, they were 5 MB of JSON a
//! second and most of what `report` parsed and freed (issue 42). Said as
//! their readings they are a fifth of that, and the reader makes the node
//! from the one before it, sharing its names.
//!
//! A change this cannot say (the node's state, a GPU gone, another UUID)
//! is written as the whole node, as before.

use crate::model::{Gpu, Node};
use serde::{Deserialize, Deserializer, Serialize};

/// A node's new GPU readings, by its place in the node list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeReadings {
    /// The node's place in the snapshot's node list.
    pub at: usize,
    /// One per GPU, in the node's order: only the fields that changed.
    pub gpus: Vec<GpuReading>,
}

/// `Some(None)`: the field became unknown (`null`); `None`: unchanged
/// (absent from the line).
fn changed<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// A GPU's fields that changed, each absent when it did not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuReading {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "changed"
    )]
    pub job: Option<Option<String>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "changed"
    )]
    pub memory_used_mib: Option<Option<u64>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "changed"
    )]
    pub sm_occupancy: Option<Option<f64>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "changed"
    )]
    pub sm_active: Option<Option<f64>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "changed"
    )]
    pub utilization: Option<Option<f64>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "changed"
    )]
    pub temperature_c: Option<Option<f64>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "changed"
    )]
    pub power_w: Option<Option<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc: Option<crate::model::EccCounts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink: Option<crate::model::NvLinkErrors>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "changed"
    )]
    pub row_remap_pending: Option<Option<bool>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "changed"
    )]
    pub row_remap_failed: Option<Option<bool>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "changed"
    )]
    pub last_xid: Option<Option<Box<crate::model::LastXid>>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "changed"
    )]
    pub recovery_action: Option<Option<crate::model::RecoveryAction>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "changed"
    )]
    pub reading_time: Option<Option<crate::model::Timestamp>>,
}

/// `Some(new)` when it differs from `old`.
fn if_changed<T: PartialEq + Clone>(old: &T, new: &T) -> Option<T> {
    (old != new).then(|| new.clone())
}

/// `new`'s readings as they differ from `old`'s, when nothing else of the
/// GPU changed; `None` otherwise. Every field is named: a new one is a
/// compile error here, not a change the recording silently loses.
fn gpu_reading(old: &Gpu, new: &Gpu) -> Option<GpuReading> {
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
    } = new;
    let fixed = old.node == *node
        && old.index == *index
        && old.uuid == *uuid
        && old.model == *model
        && old.memory_total_mib == *memory_total_mib
        && old.nvlink_links == *nvlink_links
        && old.reading_source == *reading_source
        && old.metric_names == *metric_names;
    fixed.then(|| GpuReading {
        job: if_changed(&old.job, job),
        memory_used_mib: if_changed(&old.memory_used_mib, memory_used_mib),
        sm_occupancy: if_changed(&old.sm_occupancy, sm_occupancy),
        sm_active: if_changed(&old.sm_active, sm_active),
        utilization: if_changed(&old.utilization, utilization),
        temperature_c: if_changed(&old.temperature_c, temperature_c),
        power_w: if_changed(&old.power_w, power_w),
        ecc: if_changed(&old.ecc, ecc),
        nvlink: if_changed(&old.nvlink, nvlink),
        row_remap_pending: if_changed(&old.row_remap_pending, row_remap_pending),
        row_remap_failed: if_changed(&old.row_remap_failed, row_remap_failed),
        last_xid: if_changed(&old.last_xid, last_xid),
        recovery_action: if_changed(&old.recovery_action, recovery_action),
        reading_time: if_changed(&old.reading_time, reading_time),
    })
}

/// Whether two nodes are the same but for their GPUs (every field named,
/// as above).
fn same_but_gpus(old: &Node, new: &Node) -> bool {
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
    } = new;
    old.name == *name
        && old.gpus.len() == gpus.len()
        && old.state == *state
        && old.gpu_count == *gpu_count
        && old.reason == *reason
        && old.reason_set_by == *reason_set_by
        && old.reason_time == *reason_time
        && old.back_at == *back_at
        && old.boot_time == *boot_time
        && old.gpu_model == *gpu_model
        && old.partitions == *partitions
        && old.domains == *domains
        && old.ib_ports == *ib_ports
        && old.gpu_summary == *gpu_summary
        && old.labels == *labels
        && old.fault_reports == *fault_reports
}

/// `new` said as its GPU readings since `old` (the node at place `at`),
/// when nothing else of it changed; `None` when only the whole node can
/// say it.
pub fn between(at: usize, old: &Node, new: &Node) -> Option<NodeReadings> {
    if !same_but_gpus(old, new) {
        return None;
    }
    let gpus = old
        .gpus
        .iter()
        .zip(&new.gpus)
        .map(|(o, n)| gpu_reading(o, n))
        .collect::<Option<Vec<_>>>()?;
    Some(NodeReadings { at, gpus })
}

/// `old` with `r`'s readings; `None` when they do not fit it (another
/// number of GPUs: a damaged file). The tests' shorthand: the applier
/// writes a copy in an older one's memory (`reuse`), then [`apply_onto`].
#[cfg(test)]
fn apply(old: &Node, r: &NodeReadings) -> Option<Node> {
    let mut node = old.clone();
    apply_onto(&mut node, r)?;
    Some(node)
}

/// `r`'s readings onto `node` (a copy of the node they follow); `None`
/// when they do not fit it, the node left as it was.
pub fn apply_onto(node: &mut Node, r: &NodeReadings) -> Option<()> {
    if node.gpus.len() != r.gpus.len() {
        return None;
    }
    fn set<T: Clone>(slot: &mut T, v: &Option<T>) {
        if let Some(v) = v {
            slot.clone_from(v);
        }
    }
    for (g, r) in node.gpus.iter_mut().zip(&r.gpus) {
        set(&mut g.job, &r.job);
        set(&mut g.memory_used_mib, &r.memory_used_mib);
        set(&mut g.sm_occupancy, &r.sm_occupancy);
        set(&mut g.sm_active, &r.sm_active);
        set(&mut g.utilization, &r.utilization);
        set(&mut g.temperature_c, &r.temperature_c);
        set(&mut g.power_w, &r.power_w);
        set(&mut g.ecc, &r.ecc);
        set(&mut g.nvlink, &r.nvlink);
        set(&mut g.row_remap_pending, &r.row_remap_pending);
        set(&mut g.row_remap_failed, &r.row_remap_failed);
        set(&mut g.last_xid, &r.last_xid);
        set(&mut g.recovery_action, &r.recovery_action);
        set(&mut g.reading_time, &r.reading_time);
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NodeState;
    use crate::sources::sim::{Sim, SimConfig};

    /// Through a line of JSON and back, as a reader gets it.
    fn through_json(r: &NodeReadings) -> NodeReadings {
        let line = serde_json::to_string(r).expect("json");
        serde_json::from_str(&line).expect("parse")
    }

    /// A reading that changes, one that becomes unknown (`null`) and one
    /// that becomes known again each come back as they were; a field that
    /// did not change is not on the line.
    #[test]
    fn readings_that_change_become_unknown_or_known_come_back_as_they_were() {
        let sim = Sim::new(SimConfig::default()).expect("sim");
        let old = (*sim.snapshot().nodes[0]).clone();
        assert!(old.gpus.len() >= 2, "a node with GPUs");
        let mut new = old.clone();
        new.gpus[0].power_w = Some(612.5);
        new.gpus[0].temperature_c = None;
        new.gpus[0].job = None;
        new.gpus[1].last_xid = Some(Box::new(crate::model::LastXid {
            code: 79,
            time: Some(5),
            message: None,
        }));
        new.gpus[1].ecc.dbe_volatile = Some(3).into();
        let r = between(4, &old, &new).expect("readings alone changed");
        assert_eq!(r.at, 4);
        let line = serde_json::to_value(&r).expect("json");
        assert_eq!(line["gpus"][0]["temperature_c"], serde_json::Value::Null);
        assert!(line["gpus"][0].get("utilization").is_none(), "{line}");
        assert_eq!(line["gpus"][2], serde_json::json!({}), "unchanged GPU");
        let back = apply(&old, &through_json(&r)).expect("fits");
        assert_eq!(back, new);
        // And back again: unknown to known.
        let r = between(4, &new, &old).expect("readings alone changed");
        assert_eq!(apply(&new, &through_json(&r)).expect("fits"), old);
    }

    /// What readings cannot say is written as the whole node: the node's
    /// state, a GPU gone, a GPU's UUID. Readings for another number of
    /// GPUs do not apply.
    #[test]
    fn a_change_beyond_the_readings_is_the_whole_node() {
        let sim = Sim::new(SimConfig::default()).expect("sim");
        let old = (*sim.snapshot().nodes[0]).clone();
        let mut drained = old.clone();
        drained.state = NodeState::Drain;
        assert_eq!(between(0, &old, &drained), None);
        let mut fewer = old.clone();
        fewer.gpus.pop();
        assert_eq!(between(0, &old, &fewer), None);
        let mut other = old.clone();
        other.gpus[0].uuid = Some("GPU-other".into());
        assert_eq!(between(0, &old, &other), None);
        let mut hotter = old.clone();
        hotter.gpus[0].temperature_c = Some(99.0);
        let r = between(0, &old, &hotter).expect("readings");
        assert_eq!(apply(&fewer, &r), None, "readings for more GPUs");
    }

    /// The sim's nodes, read again, are said as their readings: the delta
    /// of ten seconds holds readings, and applied to the snapshot before
    /// it gives the snapshot after, through a line of JSON.
    #[test]
    fn the_sims_nodes_read_again_are_said_as_their_readings() {
        let mut sim = Sim::new(SimConfig::default()).expect("sim");
        let before = sim.snapshot();
        sim.advance(10);
        let after = sim.snapshot();
        let d = crate::delta(&before, &after).expect("a delta");
        assert!(!d.readings.is_empty(), "no readings in {d:?}");
        let line = serde_json::to_string(&d).expect("json");
        let d: crate::Delta = serde_json::from_str(&line).expect("parse");
        let mut back = before.clone();
        crate::apply(&mut back, &d).expect("apply");
        assert_eq!(back, after);
    }
}
