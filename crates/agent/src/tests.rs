//! The agent's mapping from NVML readouts to metrics and events, with
//! readouts written by hand in the shape NVML returns (no GPU here): the
//! metrics must read back through the same path a dcgm-exporter scrape
//! takes.

use super::*;
use nightshift_sources::dcgm::{readings, textformat};

fn readouts() -> Vec<GpuReadout> {
    vec![
        GpuReadout {
            index: 0,
            uuid: Some("GPU-aaaa".into()),
            name: Some("NVIDIA H100 80GB HBM3".into()),
            gpu_util: Some(97),
            mem_used_bytes: Some(70 << 30),
            mem_total_bytes: Some(80 << 30),
            temp_c: Some(61),
            power_mw: Some(512_250),
            sbe_volatile: Some(0),
            dbe_volatile: Some(0),
            sbe_aggregate: Some(12),
            dbe_aggregate: Some(0),
            remap_pending: Some(false),
            remap_failure: Some(false),
            recovery_action: Some(0),
            sm_occupancy: Some(0.81),
            nvlink_crc_flit: Some(4150),
            nvlink_crc_data: Some(7),
            nvlink_replay: Some(1050),
            nvlink_recovery: Some(0),
            ..GpuReadout::default()
        },
        GpuReadout {
            index: 5,
            uuid: Some("GPU-bbbb".into()),
            name: Some("NVIDIA H100 80GB HBM3".into()),
            dbe_volatile: Some(1),
            dbe_aggregate: Some(2),
            remap_pending: Some(true),
            remap_failure: Some(false),
            recovery_action: Some(1),
            last_xid: Some(48),
            // A GPU whose SM occupancy GPM cannot give (pre-Hopper): unknown.
            sm_occupancy: None,
            ..GpuReadout::default()
        },
    ]
}

#[test]
fn metrics_read_back_like_a_dcgm_scrape() {
    let text = to_metrics("gpu07", &readouts());
    let (samples, errors) = textformat::parse(&text);
    assert!(errors.is_empty(), "{errors:?}");
    let r = readings(&samples, "x", 0);
    assert_eq!(r.len(), 2);
    assert!(r.iter().all(|x| x.host == "gpu07"));
    let g0 = &r[0];
    assert_eq!(g0.utilization, Some(0.97));
    assert_eq!(g0.memory_used_mib, Some(70 * 1024));
    assert_eq!(g0.memory_total_mib(), Some(80 * 1024));
    assert_eq!(g0.power_w, Some(512.25));
    assert_eq!(g0.sm_occupancy, Some(0.81));
    assert_eq!(g0.last_xid, Some(0));
    let g5 = &r[1];
    assert_eq!(
        (g5.ecc.dbe_volatile.get(), g5.row_remap_pending, g5.last_xid),
        (Some(1), Some(true), Some(48))
    );
    assert_eq!(g5.sm_occupancy, None, "left out, so unknown downstream");
    // NVLink counters under dcgm-exporter's names reach the GPU's reading;
    // a GPU NVML gave none for stays unknown.
    assert_eq!(
        (
            g0.nvlink.crc_flit.get(),
            g0.nvlink.crc_data.get(),
            g0.nvlink.replay.get(),
            g0.nvlink.recovery.get()
        ),
        (Some(4150), Some(7), Some(1050), Some(0))
    );
    assert_eq!(g5.nvlink.total(), None);
    assert_eq!(g5.temperature_c, None);
    assert!(text.contains("nightshift_gpu_recovery_action{gpu=\"5\""));
}

#[test]
fn events_have_sequence_numbers_and_survive_reconnects() {
    let mut log = EventLog::default();
    let a = log.push(10, 3, "xid", Some(79));
    let b = log.push(11, 5, "dbe", None);
    assert!(b > a);
    assert_eq!(log.since(0).len(), 2);
    assert_eq!(log.since(a).iter().map(|e| e.seq).collect::<Vec<_>>(), [b]);
    for i in 0..EVENT_LOG_LEN as u64 {
        log.push(12, 0, "sbe", Some(i));
    }
    assert_eq!(log.since(0).len(), EVENT_LOG_LEN, "bounded");
}

/// The driver's recovery action travels agent → scrape → merge → verdict:
/// a GPU whose driver says "reboot the node" gets the drain+reboot verdict
/// even without an Xid, and its node is not capacity.
#[test]
fn the_recovery_action_reaches_the_verdict() {
    use nightshift_core::engine::analysis::Base;
    use nightshift_core::engine::xid::ActionClass;
    use nightshift_core::model::{Cluster, RecoveryAction};
    use nightshift_sources::dcgm::merge::{HealthWatch, HostMap, merge};
    let gpu = GpuReadout {
        index: 2,
        uuid: Some("GPU-cccc".into()),
        recovery_action: Some(2),
        ..GpuReadout::default()
    };
    let text = to_metrics("gpu07", &[gpu]);
    let (samples, bad) = textformat::parse(&text);
    assert!(bad.is_empty(), "{bad:?}");
    let r = readings(&samples, "gpu07", 1000);
    assert_eq!(r[0].recovery_action, Some(RecoveryAction::NodeReboot));
    let mut c = Cluster {
        time: 1000,
        ..Cluster::default()
    };
    nightshift_core::engine::fixture::add_node(&mut c, "gpu07", "p", 8);
    let mut watch = HealthWatch::default();
    watch.observe(&r, &c, &HostMap::default());
    merge(&mut c, &r, "agent", &HostMap::default(), &watch);
    let base = Base::compute(
        &c,
        None,
        &nightshift_core::engine::SiteParams::default(),
        &nightshift_core::engine::xid::XidCatalog::default(),
    );
    let v = base.gpu_verdict("gpu07", 2).expect("a verdict");
    assert_eq!(v.verdict.action, ActionClass::DrainReboot);
    assert!(v.verdict.evidence.iter().any(|e| e.contains("node reboot")));
    assert!(base.unusable.contains("gpu07"));
}
