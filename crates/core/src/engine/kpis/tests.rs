use super::*;
use crate::engine::fixture::*;
use crate::model::NodeState;
use std::sync::Arc;

fn set_job(c: &mut Cluster, id: &str, f: impl FnOnce(&mut crate::model::Job)) {
    let j = c.jobs.iter_mut().find(|j| j.id == id).expect("job");
    f(Arc::make_mut(j));
}

fn free_gpus_of(c: &mut Cluster, id: &str) {
    for n in c.nodes.iter_mut() {
        for g in Arc::make_mut(n).gpus.iter_mut() {
            if g.job.as_deref() == Some(id) {
                g.job = None;
            }
        }
    }
}

/// An hour by hand: 2 nodes × 8 GPUs. At 0: A holds 6 GPUs of n1, C 5 of
/// n2; B (4 GPUs on one node) waits for resources with 5 GPUs free in
/// fragments of 2 and 3. At +600 A ends and B starts (it waited 1200 s).
/// At +1200 C fails, 600 s after its checkpoint. At +1800 n2 is drained.
/// Last snapshot at +3600.
fn hour() -> Vec<Cluster> {
    let mut c = cluster();
    c.time = NOW;
    add_node(&mut c, "n1", "p", 8);
    add_node(&mut c, "n2", "p", 8);
    run(&mut c, "A", &["n1"], 6, 3000, 86_400);
    run(&mut c, "C", &["n2"], 5, 3000, 86_400);
    pend(&mut c, "B", "p", 1, 4, 100);
    set_job(&mut c, "B", |j| {
        j.reason = Some("Resources".into());
        j.submit_time = Some(NOW - 600).into();
    });
    let mut out = vec![c.clone()];
    c.time = NOW + 600;
    set_job(&mut c, "A", |j| j.state = JobState::Completed);
    free_gpus_of(&mut c, "A");
    let b = c.jobs.iter().position(|j| j.id == "B").expect("B");
    c.jobs.remove(b);
    run(&mut c, "B", &["n1"], 4, 0, 86_400);
    set_job(&mut c, "B", |j| {
        j.submit_time = Some(NOW - 600).into();
        j.start_time = Some(NOW + 600).into();
    });
    set_job(&mut c, "C", |j| j.checkpoint.last = Some(NOW + 600).into());
    out.push(c.clone());
    c.time = NOW + 1200;
    set_job(&mut c, "C", |j| {
        j.state = JobState::Failed;
        j.end_time = Some(NOW + 1200).into();
    });
    free_gpus_of(&mut c, "C");
    out.push(c.clone());
    c.time = NOW + 1800;
    Arc::make_mut(&mut c.nodes[1]).state = NodeState::Drain;
    out.push(c.clone());
    c.time = NOW + 3600;
    out.push(c);
    out
}

#[test]
fn an_hour_checked_by_hand() {
    let mut book = KpiBook::new(7200);
    let snaps = hour();
    assert!(
        sample(&snaps[0]).fragmented,
        "5 free, at most 3 on a node, B needs 4"
    );
    assert!(!sample(&snaps[1]).fragmented);
    for c in &snaps {
        book.observe(c);
    }
    let k = book.figures(3600).expect("figures");
    assert_eq!(
        (k.from, k.to, k.observed_s, k.samples),
        (NOW, NOW + 3600, 3600, 5)
    );
    let near = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9);
    // (600 × 11 + 600 × 9 + 600 × 4 + 1800 × 4) ÷ 16 GPUs ÷ 3600 s.
    assert!(near(k.gpu_allocated, 0.375), "{:?}", k.gpu_allocated);
    // Fragmented for the first 600 s of 3600.
    assert!(near(k.fragmentation, 1.0 / 6.0), "{:?}", k.fragmentation);
    // n2 out for the last 1800 s: half a node-hour of two nodes' hour.
    assert!((k.node_hours_out - 0.5).abs() < 1e-9);
    assert!(near(k.node_availability, 0.75));
    // B waited 1200 s; one start.
    assert_eq!(k.wait_by_partition.len(), 1);
    assert_eq!(k.wait_by_partition[0].jobs, 1);
    assert_eq!(k.wait_by_partition[0].mean_s, Some(1200.0));
    assert_eq!(k.wait_by_partition[0].p95_s, Some(1200));
    assert_eq!(k.wait_by_size[0].group, "2-4 GPUs");
    // C failed 600 s after its checkpoint on 5 GPUs.
    assert_eq!(k.failures, 1);
    assert!(near(k.lost_gpu_hours_failed, 600.0 * 5.0 / 3600.0));
    assert_eq!(k.requeues, 0);
    assert!(near(k.lost_gpu_hours_requeued, 0.0));
    // The last half hour alone: n2 out all of it, nothing fragmented.
    let k = book.figures(1800).expect("figures");
    assert!(near(k.node_availability, 0.5));
    assert!(near(k.fragmentation, 0.0));
    assert_eq!(k.failures, 0);
    // Time going back (a replay sought backwards) starts the book over.
    book.observe(&snaps[0]);
    let k = book.figures(3600).expect("figures");
    assert_eq!((k.samples, k.from, k.to), (1, NOW, NOW));
}

#[test]
fn percentiles_by_nearest_rank() {
    let w: Vec<i64> = (1..=20).collect();
    assert_eq!(percentile(&w, 0.95), Some(19));
    assert_eq!(percentile(&[5], 0.95), Some(5));
    assert_eq!(percentile(&[], 0.95), None);
}

/// Jobs come and go: 100 in the data at each snapshot, 50 new ones each.
/// The health numbers' watch forgets those that left every 1,024 (it
/// stayed at twice the data, a table twice the size at 10,000 nodes); the
/// post-mortem's remembers them longer, for their fate.
#[test]
fn the_health_numbers_forget_the_jobs_that_left() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    let mut book = KpiBook::new(3600);
    let mut watch = JobWatch::default();
    let (mut next, mut most_book, mut most_watch) = (0, 0, 0);
    for round in 0..100 {
        c.time = NOW + round;
        c.jobs
            .retain(|j| j.id.parse::<i64>().is_ok_and(|k| k >= next - 50));
        for _ in 0..50 {
            pend(&mut c, &next.to_string(), "p", 1, 1, 100);
            next += 1;
        }
        book.observe(&c);
        watch.observe(&c, |_, _| {});
        most_book = most_book.max(book.jobs.remembered());
        most_watch = most_watch.max(watch.remembered());
    }
    assert_eq!(c.jobs.len(), 100);
    assert!(most_book <= 100 + 1024, "{most_book}");
    assert!(most_watch > 100 + 1024, "{most_watch}");
    // Job 4,700 left 5 snapshots ago: still known to the post-mortem's.
    assert_eq!(watch.state("4700"), Some(JobState::Pending));
}
