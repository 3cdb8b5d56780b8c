use super::*;
use crate::model::RecoveryAction;
use crate::testserver::serve;

/// A scheduler's snapshot of one 8-GPU node, gpu07.
fn slurm_with_gpu07() -> Cluster {
    let mut c = Cluster {
        name: "t".into(),
        source: "slurm".into(),
        time: 1000,
        ..Cluster::default()
    };
    crate::engine::fixture::add_node(&mut c, "gpu07", "p", 8);
    c
}

/// Endpoint rounds report each endpoint's own status, pass the
/// scheduler's on untouched (never a fresh one of their own), and lay
/// the readings, the recovery action included, over the scheduler's
/// snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_rounds_never_refresh_the_scheduler_and_keep_its_error() {
    let body = "DCGM_FI_DEV_GPU_UTIL{gpu=\"2\",Hostname=\"gpu07\"} 100\n\
                nightshift_gpu_recovery_action{gpu=\"2\",Hostname=\"gpu07\"} 2\n";
    let good = serve(body.to_string()).await;
    let dead = "http://127.0.0.1:1/metrics".to_string();
    let (stx, srx) = mpsc::channel(8);
    let e = Endpoints {
        dcgm: vec![good.clone(), dead.clone()],
        node_exporter: Vec::new(),
        prometheus: None,
        interval: Duration::from_millis(50),
        timeout: Duration::from_secs(1),
        hosts: HostMap::default(),
        ..Endpoints::default()
    };
    let mut out = spawn(Some(srx), e, crate::nothing_open()).expect("spawn");
    stx.send(Update::Snapshot(Arc::new(slurm_with_gpu07())))
        .await
        .expect("send");
    let timeout = SourceError::Timeout {
        what: "GET /slurm/v0.0.38/nodes".into(),
        secs: 10,
    };
    stx.send(Update::failed(Origin::Scheduler, timeout.clone()))
        .await
        .expect("send");
    let (mut good_ok, mut dead_err, mut sched_err, mut sched_ok) = (0, 0, 0, 0);
    let mut merged: Option<Arc<Cluster>> = None;
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    while tokio::time::Instant::now() < until && (good_ok < 3 || merged.is_none()) {
        let Ok(Some(u)) = tokio::time::timeout(Duration::from_secs(1), out.recv()).await else {
            continue;
        };
        match u {
            Update::Snapshot(c) => merged = Some(c),
            Update::Backfill(_) => panic!("no Prometheus, no back-fill"),
            Update::Refresh { .. }
            | Update::Notice(_)
            | Update::Playback(_)
            | Update::Recalled(_)
            | Update::Quality { .. } => {}
            Update::Status {
                origin: Origin::Scheduler,
                error: Some(e),
            } => {
                assert_eq!(e, timeout, "the scheduler's error as it was");
                sched_err += 1;
            }
            Update::Status {
                origin: Origin::Scheduler,
                error: None,
            } => sched_ok += 1,
            Update::Status {
                origin: Origin::Endpoint(u),
                error,
            } => {
                if u == good && error.is_none() {
                    good_ok += 1;
                }
                if u == dead {
                    assert!(
                        matches!(error, Some(SourceError::Unreachable { .. })),
                        "{error:?}"
                    );
                    dead_err += 1;
                }
            }
        }
    }
    assert!(good_ok >= 3, "the live endpoint answers every round");
    assert!(dead_err >= 1, "the dead one says so, as itself");
    assert_eq!(
        (sched_err, sched_ok),
        (1, 0),
        "the scheduler's status only passes through"
    );
    let merged = merged.expect("a merged snapshot");
    let g = merged
        .node("gpu07")
        .and_then(|n| n.gpus.iter().find(|g| g.index == 2))
        .expect("gpu07/2");
    assert_eq!(g.recovery_action, Some(RecoveryAction::NodeReboot));
    assert_eq!(g.utilization, Some(1.0));
    assert_eq!(
        merged.source, "slurm",
        "the scheduler's snapshot underneath"
    );
}

/// A Prometheus answer with warnings (a shard did not answer) is kept
/// and said: the poll's quality names the warning for the header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_prometheus_answer_is_kept_and_said() {
    let body = serde_json::json!({"status": "success", "warnings": ["store gateway 2 did not answer"],
    "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "Hostname": "gpu07"}, "value": [1796006000.0, "40"]}
    ]}});
    let url = serve(body.to_string()).await;
    let e = Endpoints {
        prometheus: Some(url.trim_end_matches("/metrics").to_string()),
        ..Endpoints::default()
    };
    let mut p = Poller::new(&e).expect("poller");
    let round = p.poll(&Cluster::default(), &[], &e.hosts).await;
    assert_eq!(round.readings.len(), 1, "the answer stands");
    assert!(
        matches!(round.quality.as_slice(), [(_, Some(q))] if q == "partial answer: store gateway 2 did not answer"),
        "{:?}",
        round.quality
    );
}

/// With Prometheus, the charts' hour is read once at start and sent
/// after the scheduler's first snapshot, its hosts named as the
/// scheduler names them (`gpu07.cluster.local` is node `gpu07`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backfill_waits_for_the_scheduler_and_uses_its_names() {
    let now = crate::host::now();
    let body = serde_json::json!({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "DCGM_FI_PROF_SM_OCCUPANCY", "gpu": "2", "Hostname": "gpu07.cluster.local"},
         "values": [[now as f64, "0.5"]]}
    ]}});
    let url = serve(body.to_string()).await;
    let (stx, srx) = mpsc::channel(8);
    let e = Endpoints {
        dcgm: Vec::new(),
        node_exporter: Vec::new(),
        prometheus: Some(url.trim_end_matches("/metrics").to_string()),
        interval: Duration::from_secs(60),
        timeout: Duration::from_secs(2),
        hosts: HostMap::default(),
        ..Endpoints::default()
    };
    let mut out = spawn(Some(srx), e, crate::nothing_open()).expect("spawn");
    // Nothing named yet: no back-fill before the scheduler's snapshot.
    let early = tokio::time::timeout(Duration::from_millis(500), async {
        loop {
            match out.recv().await {
                Some(Update::Backfill(b)) => return Some(b),
                Some(_) => {}
                None => return None,
            }
        }
    })
    .await;
    assert!(early.is_err(), "{early:?}");
    let mut c = Cluster {
        name: "t".into(),
        source: "slurm".into(),
        time: now,
        ..Cluster::default()
    };
    crate::engine::fixture::add_node(&mut c, "gpu07", "p", 8);
    stx.send(Update::Snapshot(Arc::new(c))).await.expect("send");
    let b = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match out.recv().await {
                Some(Update::Backfill(b)) => return b,
                Some(_) => {}
                None => panic!("the endpoints stopped"),
            }
        }
    })
    .await
    .expect("a back-fill");
    let g = &b.gpus[&("gpu07".to_string(), 2)];
    assert_eq!(g.occupancy.last(), Some(&Some(50)), "{:?}", g.occupancy);
}

/// One slow endpoint never ages another origin's data (issue 43): while a
/// merge of the endpoints' readings takes seconds (a huge fleet's), the
/// scheduler's statuses still pass at once, and the merged snapshot
/// follows when it is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_merge_never_holds_up_the_schedulers_status() {
    let body = "DCGM_FI_DEV_GPU_UTIL{gpu=\"2\",Hostname=\"gpu07\"} 100\n";
    let good = serve(body.to_string()).await;
    let (stx, srx) = mpsc::channel(8);
    let e = Endpoints {
        dcgm: vec![good],
        interval: Duration::from_secs(60),
        timeout: Duration::from_secs(1),
        merge_delay: Duration::from_secs(3),
        ..Endpoints::default()
    };
    let mut out = spawn(Some(srx), e, crate::nothing_open()).expect("spawn");
    stx.send(Update::Snapshot(Arc::new(slurm_with_gpu07())))
        .await
        .expect("send");
    // The merge of that snapshot has begun; the scheduler answers again.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sent = tokio::time::Instant::now();
    stx.send(Update::ok(Origin::Scheduler)).await.expect("send");
    let mut status_in = None;
    let mut snapshot_in = None;
    let until = sent + Duration::from_secs(10);
    while tokio::time::Instant::now() < until && (status_in.is_none() || snapshot_in.is_none()) {
        let Ok(Some(u)) = tokio::time::timeout(Duration::from_secs(1), out.recv()).await else {
            continue;
        };
        match u {
            Update::Status {
                origin: Origin::Scheduler,
                error: None,
            } => status_in = status_in.or(Some(sent.elapsed())),
            Update::Snapshot(_) => snapshot_in = snapshot_in.or(Some(sent.elapsed())),
            _ => {}
        }
    }
    let (Some(status), Some(snapshot)) = (status_in, snapshot_in) else {
        panic!("status {status_in:?}, snapshot {snapshot_in:?}");
    };
    assert!(
        status < snapshot,
        "the scheduler's status came after the slow merge: {status:?} vs {snapshot:?}"
    );
}

/// Where endpoints are laid over the scheduler's snapshot, the merge is
/// where the snapshot is made, and it is finished there: `[topology]`'s
/// domains on the merged snapshot, the unknown name said before it, and
/// the recording's sink offered the very snapshot the analysis gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_merge_finishes_the_snapshot_it_makes() {
    use crate::assemble::{Assembly, Sink};
    use crate::site_topology::SiteDomains;
    struct Kept(Arc<std::sync::Mutex<Vec<Arc<Cluster>>>>);
    impl Sink for Kept {
        fn offer(&mut self, c: &Arc<Cluster>) -> Option<String> {
            self.0.lock().ok()?.push(c.clone());
            None
        }
    }
    let body = "DCGM_FI_DEV_GPU_UTIL{gpu=\"2\",Hostname=\"gpu07\"} 100\n";
    let url = serve(body.to_string()).await;
    let (stx, srx) = mpsc::channel(8);
    let e = Endpoints {
        dcgm: vec![url],
        interval: Duration::from_millis(50),
        timeout: Duration::from_secs(1),
        ..Endpoints::default()
    };
    let pdu = crate::model::Domain::new("power", "pdu-a");
    let site = SiteDomains(vec![(pdu.clone(), vec!["gpu07".into(), "gpu99".into()])]);
    let kept = Arc::new(std::sync::Mutex::new(Vec::new()));
    let assembly = Assembly::new(site).with_sink(Box::new(Kept(kept.clone())));
    let mut out = spawn_with(Some(srx), e, crate::nothing_open(), assembly).expect("spawn");
    stx.send(Update::Snapshot(Arc::new(slurm_with_gpu07())))
        .await
        .expect("send");
    let (mut notes, mut merged) = (Vec::new(), None);
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while tokio::time::Instant::now() < until {
        let Ok(Some(u)) = tokio::time::timeout(Duration::from_secs(1), out.recv()).await else {
            continue;
        };
        match u {
            Update::Notice(n) => notes.push(n),
            Update::Snapshot(c)
                if c.node("gpu07")
                    .is_some_and(|n| n.gpus.iter().any(|g| g.reading_time.is_some())) =>
            {
                merged = Some(c);
                break;
            }
            _ => {}
        }
    }
    let merged = merged.expect("a merged snapshot with the endpoint's reading");
    let node = merged.node("gpu07").expect("gpu07");
    assert!(node.domains.contains(&pdu), "{:?}", node.domains);
    assert_eq!(
        notes,
        ["[topology] names 1 node(s) this cluster does not have: gpu99"],
        "said once, before the snapshot"
    );
    let kept = kept.lock().expect("lock");
    assert!(
        kept.iter().any(|c| Arc::ptr_eq(c, &merged)),
        "the sink was offered the snapshot the analysis got"
    );
}
