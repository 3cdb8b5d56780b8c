//! dcgm-exporter scrapes: real ones from public threads (verbatim, split on
//! their `# ---- source` markers) and one of ours in the newer exporter's
//! shape (tests/fixtures/dcgm/h100-node.txt).

use super::merge::{ENDPOINT_ONLY, HealthWatch, HostMap, merge};
use super::textformat::parse;
use super::{Reading, readings};
use crate::model::Cluster;

const REAL: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/dcgm/dcgm-exporter-samples.txt"
));
const OURS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/dcgm/h100-node.txt"
));

/// The scrapes, split on the lines that start a `# ---- source:` block.
fn blocks() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in REAL.lines() {
        if line.starts_with("# ---- source:") {
            out.push(String::new());
        }
        if let Some(b) = out.last_mut() {
            b.push_str(line);
            b.push('\n');
        }
    }
    out
}

/// `r` merged, as an endpoint alone gives it, into an empty snapshot at
/// time 1000; and the health watch that saw it.
fn merged_alone(r: &[Reading]) -> (Cluster, HealthWatch) {
    let mut c = Cluster {
        name: "t".into(),
        time: 1000,
        ..Cluster::default()
    };
    let mut watch = HealthWatch::default();
    watch.observe(r, &c, &HostMap::default());
    merge(&mut c, r, "dcgm", &HostMap::default(), &watch);
    (c, watch)
}

fn read(text: &str, host: &str) -> Vec<Reading> {
    let (samples, errors) = parse(text);
    assert!(errors.is_empty(), "{errors:?}");
    readings(&samples, host, 1000)
}

#[test]
fn every_real_scrape_parses() {
    let b = blocks();
    assert_eq!(b.len(), 6);
    for block in &b {
        let (_, errors) = parse(block);
        assert!(errors.is_empty(), "{errors:?}");
    }
}

#[test]
fn capital_hostname_and_mig_instances() {
    let b = blocks();
    // Block 1: H100 with MIG, capital "Hostname", pod labels on some series.
    let r = read(&b[0], "fallback");
    assert_eq!(r.len(), 1, "three MIG instances are one GPU");
    assert_eq!(r[0].host, "gsrh100-074");
    assert_eq!(
        r[0].utilization,
        Some(0.0),
        "graphics-engine activity stands in for utilization"
    );
    assert!(
        r[0].pod
            .as_deref()
            .is_some_and(|p| p.starts_with("text-embedding"))
    );
    // Block 3: A30 MIG, per-instance series for temp and Xid.
    let r = read(&b[2], "fallback");
    assert_eq!(r.iter().map(|x| x.index).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(r[0].temperature_c, Some(35.0));
    assert_eq!(r[0].last_xid, Some(0));
}

#[test]
fn lowercase_hostname_and_the_windowed_xid_counter() {
    let b = blocks();
    let r = read(&b[3], "fallback");
    assert!(
        r.iter().all(|x| x.host == "dcgm-exporter-wwwjh"),
        "newer exporters write `hostname`"
    );
    let g1 = r.iter().find(|x| x.index == 1).expect("gpu 1");
    assert_eq!(g1.temperature_c, Some(44.0));
    // Block 5: the windowed counter carries the Xid in a label.
    let r = read(&b[4], "fallback");
    assert_eq!(r[0].recent_xids, [42]);
    assert_eq!(r[0].host, "workstation");
}

#[test]
fn missing_families_are_unknown_not_zero_and_blanks_are_blank() {
    let b = blocks();
    // Block 2 (V100, bare metal) has no profiling and no ECC families.
    let r = read(&b[1], "fallback");
    let g0 = r.iter().find(|x| x.index == 0).expect("gpu 0");
    assert_eq!(g0.sm_occupancy, None);
    assert_eq!(g0.ecc.dbe_volatile, None);
    assert_eq!(g0.utilization, Some(0.0));
    let ours = read(OURS, "fallback");
    let g3 = ours.iter().find(|x| x.index == 3).expect("gpu 3");
    assert_eq!(g3.temperature_c, None, "9223372036854775794 means no data");
    assert_eq!(g3.last_xid, Some(79));
}

#[test]
fn readings_merge_into_the_scheduler_snapshot() {
    let r = read(OURS, "fallback");
    let g5 = r.iter().find(|x| x.index == 5).expect("gpu 5");
    assert_eq!(
        (
            g5.ecc.dbe_volatile.get(),
            g5.ecc.dbe_aggregate.get(),
            g5.row_remap_pending
        ),
        (Some(1), Some(2), Some(true))
    );
    assert_eq!(g5.memory_total_mib(), Some(81559));
    assert_eq!(g5.utilization, Some(0.95));
    // A scheduler that knows gpu01.cluster as gpu01, and one more node.
    let (c, mut watch) = merged_alone(&r);
    let n = c.node("gpu01").expect("an endpoint-only node appears");
    assert_eq!(
        n.labels.get(ENDPOINT_ONLY).map(String::as_str),
        Some("true")
    );
    assert_eq!(
        n.gpus.iter().map(|g| g.index).collect::<Vec<_>>(),
        [0, 3, 5]
    );
    let g = &n.gpus[2];
    assert_eq!(g.reading_source.as_deref(), Some("dcgm"));
    assert_eq!(g.last_xid.as_ref().map(|x| x.code), Some(48));
    assert_eq!(
        c.events.iter().filter_map(|e| e.xid()).collect::<Vec<_>>(),
        [79, 48]
    );
    // GPU 5's uncorrectable error and pending remap are an incident too,
    // as they are in the sim.
    let ecc: Vec<&crate::model::Event> = c
        .events
        .iter()
        .filter(|e| matches!(e.kind, crate::model::EventKind::Ecc { .. }))
        .collect();
    assert_eq!(ecc.len(), 1, "{:?}", c.events);
    assert_eq!(ecc[0].gpu, Some(5));
    assert!(ecc[0].message.contains("uncorrectable ECC errors: 1"));
    assert!(ecc[0].message.contains("row remap pending"));
    // The same readings again are not new events; a new value is.
    watch.observe(&r, &c, &HostMap::default());
    assert_eq!(watch.events().len(), 3);
    let mut again = r.clone();
    again[2].last_xid = Some(63);
    watch.observe(&again, &c, &HostMap::default());
    assert_eq!(watch.events().last().and_then(|e| e.xid()), Some(63));
    assert_eq!(watch.events().len(), 4);
    // A second uncorrectable error is a new incident; a failed remap too.
    let mut worse = again.clone();
    let g5 = worse.iter_mut().find(|x| x.index == 5).expect("gpu 5");
    g5.ecc.dbe_volatile = Some(2).into();
    watch.observe(&worse, &c, &HostMap::default());
    assert_eq!(watch.events().len(), 5);
    let g5 = worse.iter_mut().find(|x| x.index == 5).expect("gpu 5");
    g5.row_remap_failed = Some(true);
    watch.observe(&worse, &c, &HostMap::default());
    assert_eq!(watch.events().len(), 6);
    assert!(
        watch
            .events()
            .last()
            .is_some_and(|e| e.message.contains("row remap failed"))
    );
}

#[test]
fn host_names_map_to_scheduler_nodes() {
    let mut c = Cluster {
        time: 1000,
        ..Cluster::default()
    };
    crate::engine::fixture::add_node(&mut c, "gpu01", "p", 8);
    let mut r = read(OURS, "fallback");
    for x in r.iter_mut() {
        x.host = "gpu01.cluster.local".into();
    }
    merge(
        &mut c,
        &r,
        "dcgm",
        &HostMap::default(),
        &HealthWatch::default(),
    );
    assert_eq!(c.nodes.len(), 1, "short name matched");
    let mut hosts = HostMap::default();
    hosts
        .0
        .insert("gpu01.cluster.local".into(), "renamed".into());
    merge(&mut c, &r, "dcgm", &hosts, &HealthWatch::default());
    assert!(c.node("renamed").is_some(), "the configured mapping wins");
}

/// The same GPU five times, with Xid 0, 79, 0, 13, 0: the 79 is not hidden
/// by the zero after it, the 13 is kept too, and the duplicates are named.
#[test]
fn duplicate_series_keep_the_worst_and_are_reported() {
    let mut text = String::new();
    for (x, dbe) in [(0, 0), (79, 2), (0, 0), (13, 1), (0, 0)] {
        text.push_str(&format!(
            "DCGM_FI_DEV_XID_ERRORS{{gpu=\"0\",Hostname=\"n1\"}} {x}\nDCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{gpu=\"0\",Hostname=\"n1\"}} {dbe}\n"
        ));
    }
    let (samples, bad) = parse(&text);
    assert!(bad.is_empty());
    let (r, warnings) = super::readings_checked(&samples, "n1", 1000);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].last_xid, Some(79));
    assert!(r[0].recent_xids.contains(&13), "{:?}", r[0].recent_xids);
    assert_eq!(r[0].ecc.dbe_volatile, Some(2), "the highest count");
    assert!(
        warnings.len() == 1 && warnings[0].starts_with("8 duplicate series"),
        "{warnings:?}"
    );
    let c = Cluster::default();
    let mut watch = HealthWatch::default();
    watch.observe(&r, &c, &HostMap::default());
    let xids: Vec<u32> = watch.events().iter().filter_map(|e| e.xid()).collect();
    assert!(xids.contains(&79) && xids.contains(&13), "{xids:?}");
}

/// dcgm-exporter's NVLink error counters (the names of its
/// `etc/default-counters.csv`, commented out there until a site enables
/// them) reach the GPU; a repeated series keeps its highest count; a GPU
/// whose exporter does not report them stays unknown, never zero.
#[test]
fn nvlink_error_counters_reach_the_gpu() {
    let text = "\
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{gpu=\"3\",Hostname=\"gpu01\"} 4150
DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL{gpu=\"3\",Hostname=\"gpu01\"} 7
DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{gpu=\"3\",Hostname=\"gpu01\"} 1050
DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{gpu=\"3\",Hostname=\"gpu01\"} 1049
DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL{gpu=\"3\",Hostname=\"gpu01\"} 2
DCGM_FI_DEV_GPU_UTIL{gpu=\"4\",Hostname=\"gpu01\"} 90
";
    let (samples, bad) = parse(text);
    assert!(bad.is_empty(), "{bad:?}");
    let (r, _) = super::readings_checked(&samples, "gpu01", 1000);
    let g3 = r.iter().find(|x| x.index == 3).expect("gpu 3");
    assert_eq!(
        g3.nvlink,
        crate::model::NvLinkErrors {
            crc_flit: Some(4150).into(),
            crc_data: Some(7).into(),
            replay: Some(1050).into(),
            recovery: Some(2).into(),
        },
        "the highest of a repeated count"
    );
    let (c, _) = merged_alone(&r);
    let n = c.node("gpu01").expect("the endpoint's node");
    let gpu = |i: u32| n.gpus.iter().find(|g| g.index == i).expect("gpu");
    assert_eq!(gpu(3).nvlink.total(), Some(4150 + 7 + 1050 + 2));
    assert_eq!(gpu(4).nvlink.total(), None, "not reported: unknown");
}

/// DCGM's per-link fields (`…_ERROR_COUNT_L<n>`, as a site lists them in
/// dcgm-exporter's counters file) say which link fails; alone, their sum
/// is the GPU's total.
#[test]
fn per_link_nvlink_counters_name_the_failing_link() {
    let text = "\
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L0{gpu=\"1\",Hostname=\"gpu01\"} 0
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L3{gpu=\"1\",Hostname=\"gpu01\"} 4150
DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_L3{gpu=\"1\",Hostname=\"gpu01\"} 1050
DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_L11{gpu=\"1\",Hostname=\"gpu01\"} 2
DCGM_FI_DEV_NVLINK_BANDWIDTH_L3{gpu=\"1\",Hostname=\"gpu01\"} 123456
";
    let (samples, bad) = parse(text);
    assert!(bad.is_empty(), "{bad:?}");
    let (r, _) = super::readings_checked(&samples, "gpu01", 1000);
    let g = &r[0];
    assert_eq!(
        g.nvlink_links.keys().copied().collect::<Vec<_>>(),
        [0, 3, 11]
    );
    assert_eq!(g.nvlink_links[&3].crc_flit, Some(4150));
    assert_eq!(g.nvlink_links[&3].crc_data, None, "not reported: unknown");
    assert_eq!(
        (
            g.nvlink.crc_flit.get(),
            g.nvlink.replay.get(),
            g.nvlink.crc_data.get()
        ),
        (Some(4150), Some(1052), None)
    );
    let (c, _) = merged_alone(&r);
    let gpu = &c.node("gpu01").expect("node").gpus[0];
    assert_eq!(gpu.nvlink_links[&11].replay, Some(2));
}

/// An Xid nightshift first reads at 03:05 that Prometheus saw at 02:47 is
/// dated 02:47 — whether the history comes before or after the reading.
#[test]
fn xids_from_prometheus_history_date_the_events() {
    use crate::model::{Backfill, GpuBackfill, XidSeen};
    let text = "DCGM_FI_DEV_XID_ERRORS{gpu=\"3\",Hostname=\"n1\"} 79\n";
    let (samples, _) = parse(text);
    let r = super::readings(&samples, "n1", 10_000);
    let mut b = Backfill::default();
    b.gpus.insert(
        ("n1".into(), 3),
        GpuBackfill {
            xids: vec![
                XidSeen {
                    code: 13,
                    first_seen: 8_000,
                    at_window_start: true,
                },
                XidSeen {
                    code: 79,
                    first_seen: 8_920,
                    at_window_start: false,
                },
            ],
            ..GpuBackfill::default()
        },
    );
    for history_first in [false, true] {
        let mut watch = HealthWatch::default();
        if history_first {
            watch.learn_history(&b);
        }
        watch.observe(&r, &Cluster::default(), &HostMap::default());
        if !history_first {
            assert_eq!(watch.events()[0].time, 10_000, "read now");
            watch.learn_history(&b);
        }
        let e = &watch.events()[0];
        assert_eq!(e.xid(), Some(79));
        assert_eq!(e.time, 8_920, "history_first={history_first}");
        assert!(e.message.contains("first seen at"), "{}", e.message);
        // Learning twice does not move it again or repeat the words.
        watch.learn_history(&b);
        assert_eq!(watch.events()[0].message.matches("first seen").count(), 1);
    }
}

/// The Xid an exporter keeps reporting is dated when it was first seen,
/// not at each scrape (the GPU table's time moved with every refresh).
#[test]
fn an_xid_is_dated_when_first_seen_not_at_each_scrape() {
    let first = read(OURS, "fallback");
    let t0 = first[0].time;
    let mut watch = HealthWatch::default();
    let base = Cluster::default();
    watch.observe(&first, &base, &HostMap::default());
    let mut later = first.clone();
    for r in &mut later {
        r.time = t0 + 600;
    }
    watch.observe(&later, &base, &HostMap::default());
    let mut c = Cluster::default();
    merge(&mut c, &later, "dcgm", &HostMap::default(), &watch);
    let xids: Vec<(u32, Option<i64>)> = c
        .nodes
        .iter()
        .flat_map(|n| n.gpus.iter())
        .filter_map(|g| g.last_xid.as_ref().map(|x| (x.code, x.time)))
        .collect();
    assert!(!xids.is_empty());
    for (code, time) in xids {
        assert_eq!(time, Some(t0), "Xid {code}");
    }
}

/// The console polls the endpoints and the scheduler side by side: an Xid
/// read before the scheduler's first answer names the job that held the
/// GPU once the answer comes (the TUI showed `-` where the CLI, reading
/// both before answering, named job 4).
#[test]
fn an_event_read_before_the_scheduler_answers_names_its_job_once_it_does() {
    use crate::engine::fixture::{NOW, add_node, cluster, run};
    let mut r = read(OURS, "fallback");
    for x in &mut r {
        x.time = NOW;
    }
    let mut watch = HealthWatch::default();
    watch.observe(&r, &Cluster::default(), &HostMap::default());
    let x79 = |w: &HealthWatch| {
        w.events()
            .iter()
            .find(|e| e.xid() == Some(79))
            .map(|e| e.jobs.iter().map(|j| j.id.clone()).collect::<Vec<_>>())
    };
    assert_eq!(x79(&watch), Some(vec![]), "no scheduler yet");
    let mut c = cluster();
    add_node(&mut c, "gpu01", "p", 8);
    run(&mut c, "4", &["gpu01"], 8, 3600, 86_400);
    watch.observe(&r, &c, &HostMap::default());
    assert_eq!(x79(&watch), Some(vec!["4".to_string()]));
    // A job that started after the Xid was not hit by it.
    let mut later = cluster();
    add_node(&mut later, "gpu01", "p", 8);
    run(&mut later, "5", &["gpu01"], 8, 0, 86_400);
    let mut fresh = HealthWatch::default();
    let mut old = r.clone();
    for x in &mut old {
        x.time = NOW - 60;
    }
    fresh.observe(&old, &Cluster::default(), &HostMap::default());
    fresh.observe(&old, &later, &HostMap::default());
    assert_eq!(x79(&fresh), Some(vec![]));
}

/// The families a Prometheus is asked for by name are the ones the
/// readings read (a name the parser ignores would be asked for nothing; a
/// family the parser reads but the query leaves out would never come).
#[test]
fn the_families_asked_for_by_name_are_the_ones_read() {
    for name in super::read_families() {
        let line = if name.starts_with("DCGM_EXP_XID") || name.ends_with("_ACTIVE") {
            format!("{name}{{gpu=\"0\",Hostname=\"h\",xid=\"79\"}} 1\n")
        } else {
            format!("{name}{{gpu=\"0\",Hostname=\"h\"}} 1\n")
        };
        let (samples, bad) = parse(&line);
        assert!(bad.is_empty(), "{name}: {bad:?}");
        let r = super::readings(&samples, "h", 0);
        let read = r.first().is_some_and(|g| {
            *g != super::Reading {
                host: "h".into(),
                index: 0,
                time: 0,
                ..Default::default()
            }
        });
        assert!(read, "{name} is asked for but not read: {r:?}");
    }
    // Families the parser reads and the list must hold, spot-checked.
    for name in [
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "nightshift_gpu_recovery_action",
    ] {
        assert!(super::read_families().any(|n| n == name), "{name}");
    }
    let q = crate::prometheus::query();
    assert!(q.contains("nightshift_gpu_recovery_action|"), "{q}");
    assert!(!q.contains(".*"), "by name, not every family: {q}");
}

/// dcgm-exporter 4.9 renamed its metrics to DCGM 4.7's names and changed
/// some units (utilization a 0–1 ratio, GPU memory in bytes); the same
/// GPUs scraped under the new names (tests/fixtures/dcgm/h100-node-4.9.txt,
/// the 4.8 fixture renamed as DCGM's table of deprecated aliases says)
/// read the same, each reading saying which names it came in.
#[test]
fn the_names_of_dcgm_exporter_4_9_read_as_the_names_before_it() {
    const NEW: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/dcgm/h100-node-4.9.txt"
    ));
    let (old, bad) = parse(OURS);
    assert!(bad.is_empty(), "{bad:?}");
    let (new, bad) = parse(NEW);
    assert!(bad.is_empty(), "{bad:?}");
    assert!(
        !new.iter().any(|s| s.name == "DCGM_FI_DEV_GPU_UTIL"),
        "the 4.9 fixture has none of the old names"
    );
    let old = super::readings(&old, "h", 0);
    let new = super::readings(&new, "h", 0);
    assert_eq!(old.len(), 3);
    for (o, n) in old.iter().zip(&new) {
        assert_eq!(o.names, Some(super::MetricNames::Legacy), "{o:?}");
        assert_eq!(n.names, Some(super::MetricNames::Dcgm47), "{n:?}");
        let n = super::Reading {
            names: o.names,
            ..n.clone()
        };
        assert_eq!(*o, n);
    }
    let g0 = &new[0];
    assert_eq!(g0.utilization, Some(0.97), "a ratio, not 0.97 %");
    assert_eq!(g0.memory_used_mib, Some(71234), "bytes as MiB");
    assert_eq!(g0.sm_occupancy, Some(0.812));
    // The per-link NVLink counters of both generations.
    let links = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_L3_TOTAL{gpu=\"1\",hostname=\"h\"} 7\n\
        DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L2{gpu=\"1\",hostname=\"h\"} 5\n";
    let (s, bad) = parse(links);
    assert!(bad.is_empty(), "{bad:?}");
    let r = super::readings(&s, "h", 0);
    assert_eq!(r[0].nvlink_links[&3].crc_flit, Some(7));
    assert_eq!(r[0].nvlink_links[&2].crc_flit, Some(5));
    assert_eq!(r[0].nvlink.crc_flit, Some(12));
    assert_eq!(r[0].names, Some(super::MetricNames::Mixed));
}

/// An NVLink storm on a real source (issue 60): dgx2 GPU 3's flit CRC
/// counter rising 300 a second, scraped every 5 s from dcgm-exporter
/// (before 4.9 and since) or answered by Prometheus — parsed, laid over
/// the scheduler's snapshot and observed by the analysis as the console
/// observes each poll — is one NVLink incident of that GPU, with the
/// catalog's drain, by 35 s. It was none: the storm was the sim's own
/// event, which no source gives.
#[test]
fn an_nvlink_storm_read_from_a_real_source_is_an_incident_of_its_gpu() {
    use crate::engine::incidents::IncidentKind;
    use crate::engine::xid::{ActionClass, XidCatalog};
    let (site, cat) = (crate::engine::SiteParams::default(), XidCatalog::default());
    let t0 = 1_796_000_000i64;
    let cases = [
        ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", false),
        ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_TOTAL", false),
        ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", true),
        ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_TOTAL", true),
    ];
    for (family, prometheus) in cases {
        let mut m = crate::engine::memory::Memory::default();
        let mut last = None;
        for k in 0..=7i64 {
            let t = t0 + 5 * k;
            let count = 300 * 5 * k;
            let r = if prometheus {
                let answer = crate::prometheus::answer(serde_json::json!({
                    "status": "success",
                    "data": {"resultType": "vector", "result": [
                        {"metric": {"__name__": family, "gpu": "3", "Hostname": "dgx2", "UUID": "GPU-3"},
                         "value": [t as f64, count.to_string()]}
                    ]}
                }));
                let (samples, _) = crate::prometheus::samples_from(answer).expect("samples");
                readings(&samples, "unknown", t)
            } else {
                let text =
                    format!("{family}{{gpu=\"3\",UUID=\"GPU-3\",Hostname=\"dgx2\"}} {count}\n");
                let (samples, errors) = parse(&text);
                assert!(errors.is_empty(), "{errors:?}");
                readings(&samples, "dgx2", t)
            };
            let mut c = Cluster {
                name: "lab".into(),
                source: "slurm".into(),
                time: t,
                ..Cluster::default()
            };
            crate::engine::fixture::add_node(&mut c, "dgx2", "gpu", 8);
            merge(
                &mut c,
                &r,
                "dcgm",
                &HostMap::default(),
                &HealthWatch::default(),
            );
            m.observe(&c, &site);
            last = Some(c);
        }
        let c = last.expect("a snapshot");
        let b = m.base(&c, &site, &cat);
        let storms: Vec<_> = b
            .incidents
            .iter()
            .filter(|i| i.kind == IncidentKind::Nvlink)
            .collect();
        assert_eq!(storms.len(), 1, "{family} {prometheus}: {:?}", b.incidents);
        assert_eq!((storms[0].node.as_str(), storms[0].gpu), ("dgx2", Some(3)));
        assert_eq!(storms[0].action, ActionClass::DrainInvestigate);
        assert!(storms[0].is_open(), "{}", storms[0].status);
    }
}
