use super::*;
use crate::engine::fixture::*;
use crate::engine::plan::plan;
use crate::model::NodeState;
use crate::sim::{Sim, SimConfig};
use proptest::prelude::*;

fn site() -> SiteParams {
    SiteParams::default()
}

fn base_of(c: &Cluster) -> Base {
    Base::compute(c, None, &site(), &crate::engine::xid::XidCatalog::default())
}

#[test]
fn draining_a_node_kills_the_whole_gang() {
    let mut c = cluster();
    for n in ["n1", "n2", "n3"] {
        add_node(&mut c, n, "p", 8);
    }
    run(&mut c, "gang", &["n1", "n2"], 8, 600, 7200);
    run(&mut c, "solo", &["n3"], 4, 600, 7200);
    let b = blast(
        &c,
        &base_of(&c),
        &Target::Drain {
            reason: String::new(),
            node: "n2".into(),
            requeue: true,
        },
        &site(),
    )
    .expect("blast");
    let ids: Vec<&str> = b.killed.iter().map(|k| k.id.as_str()).collect();
    assert_eq!(ids, vec!["gang"]);
    assert_eq!(b.gpus_freed, 16);
    assert_eq!(b.gpus_out_of_service, 8);
    assert!((b.cluster.share - 8.0 / 24.0).abs() < 1e-9);
    assert!(b.killed[0].requeued);
}

#[test]
fn separate_jobs_of_one_gang_die_together() {
    let mut c = cluster();
    for n in ["n1", "n2"] {
        add_node(&mut c, n, "p", 8);
    }
    let a = run(&mut c, "pod-0", &["n1"], 8, 600, 7200);
    let b = run(&mut c, "pod-1", &["n2"], 8, 600, 7200);
    std::sync::Arc::make_mut(&mut c.jobs[a]).gang = Some("pg".into());
    std::sync::Arc::make_mut(&mut c.jobs[b]).gang = Some("pg".into());
    let r = blast(
        &c,
        &base_of(&c),
        &Target::Drain {
            reason: String::new(),
            node: "n1".into(),
            requeue: true,
        },
        &site(),
    )
    .expect("blast");
    assert_eq!(r.killed.len(), 2);
    assert!(r.killed.iter().any(|k| k.id == "pod-1" && k.via_gang));
}

#[test]
fn draining_a_drained_node_is_a_no_op() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    std::sync::Arc::make_mut(&mut c.nodes[0]).state = NodeState::Drain;
    let b = blast(
        &c,
        &base_of(&c),
        &Target::Drain {
            reason: String::new(),
            node: "n1".into(),
            requeue: true,
        },
        &site(),
    )
    .expect("blast");
    assert!(b.no_op, "{}", b.summary);
    assert!(
        blast(
            &c,
            &base_of(&c),
            &Target::Drain {
                reason: String::new(),
                node: "nope".into(),
                requeue: true
            },
            &site()
        )
        .is_err()
    );
}

#[test]
fn queued_jobs_move_when_capacity_goes() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    add_node(&mut c, "n2", "p", 8);
    run(&mut c, "r", &["n1"], 8, 0, 1000);
    let q = pend(&mut c, "q", "p", 1, 8, 10);
    let b = blast(
        &c,
        &base_of(&c),
        &Target::Drain {
            reason: String::new(),
            node: "n2".into(),
            requeue: true,
        },
        &site(),
    )
    .expect("blast");
    let m = b.moved.iter().find(|m| m.id == "q").expect("q moves");
    assert_eq!(m.before, Some(NOW));
    assert_eq!(m.after, Some(NOW + 1000));
    assert_eq!(m.delta_s, Some(1000));
    let _ = q;
}

#[test]
fn raising_a_priority_jumps_the_jobs_between() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    run(&mut c, "r", &["n1"], 8, 0, 1000);
    pend(&mut c, "a", "p", 1, 8, 50);
    pend(&mut c, "b", "p", 1, 8, 40);
    pend(&mut c, "low", "p", 1, 8, 10);
    let r = blast(
        &c,
        &base_of(&c),
        &Target::Priority {
            job: "low".into(),
            value: 100,
        },
        &site(),
    )
    .expect("blast");
    assert_eq!(r.jumped, vec!["a".to_string(), "b".to_string()]);
    assert!(r.falls_behind.is_empty());
    assert!(r.killed.is_empty());
    assert!(
        r.moved
            .iter()
            .any(|m| m.id == "a" && m.delta_s == Some(3600))
    );
}

#[test]
fn the_sim_xid79_drain_takes_the_four_node_gang() {
    let c = Sim::new(SimConfig::default()).expect("sim").snapshot();
    let b = blast(
        &c,
        &base_of(&c),
        &Target::Drain {
            reason: String::new(),
            node: "h100-03".into(),
            requeue: true,
        },
        &site(),
    )
    .expect("blast");
    assert_eq!(b.killed.len(), 1);
    let k = &b.killed[0];
    assert_eq!(k.name, "llm-pretrain-70b");
    assert_eq!(k.nodes.len(), 4);
    assert_eq!(b.gpus_freed, 32);
    // 17.5 minutes since the checkpoint × 32 GPUs.
    assert!((b.lost_gpu_hours - 1050.0 / 3600.0 * 32.0).abs() < 1e-9);
    assert_eq!(
        k.restore.load_s.value,
        Some(120.0),
        "1.2 TB at the default 10 GB/s"
    );
}

/// A random cluster: nodes of 8 GPUs, running jobs on 1–3 nodes (some in
/// shared gangs), pending jobs of random shapes.
fn arb_cluster() -> impl Strategy<Value = Cluster> {
    (
        2usize..8,
        prop::collection::vec((1usize..4, 1u32..9, 0u64..5000, 1u64..4), 0..10),
        prop::collection::vec((1u32..3, 1u32..9, 0u64..100), 0..8),
    )
        .prop_map(|(nodes, running, pending)| {
            let mut c = cluster();
            for i in 0..nodes {
                add_node(&mut c, &format!("n{i}"), "p", 8);
            }
            for (k, (span, gpn, ran, gang)) in running.into_iter().enumerate() {
                let free: Vec<String> = c
                    .nodes
                    .iter()
                    .filter(|n| n.gpus.iter().filter(|g| g.job.is_none()).count() as u32 >= gpn)
                    .take(span)
                    .map(|n| n.name.clone())
                    .collect();
                if free.len() < span {
                    continue;
                }
                let names: Vec<&str> = free.iter().map(String::as_str).collect();
                let j = run(&mut c, &format!("r{k}"), &names, gpn, ran as i64, 6000);
                std::sync::Arc::make_mut(&mut c.jobs[j]).gang = Some(format!("g{gang}").into());
            }
            for (k, (n, g, prio)) in pending.into_iter().enumerate() {
                pend(&mut c, &format!("q{k}"), "p", n, g, prio);
            }
            c
        })
}

proptest! {
    #[test]
    fn drain_kills_every_job_on_the_node_and_every_rank_of_their_gangs(c in arb_cluster(), pick in 0usize..8) {
        let node = c.nodes[pick % c.nodes.len()].name.clone();
        let b = blast(&c, &base_of(&c), &Target::Drain { reason: String::new(), node: node.clone(), requeue: true }, &site()).expect("blast");
        let killed: BTreeSet<&str> = b.killed.iter().map(|k| k.id.as_str()).collect();
        for j in c.jobs.iter().filter(|j| j.state.holds_resources()) {
            if j.nodes.contains(&node) {
                prop_assert!(killed.contains(j.id.as_str()), "{} runs on {node}", j.id);
            }
        }
        let gangs: BTreeSet<&str> = c.jobs.iter().filter(|j| killed.contains(j.id.as_str())).filter_map(|j| j.gang.as_deref()).collect();
        for j in c.jobs.iter().filter(|j| j.state.holds_resources()) {
            if j.gang.as_deref().is_some_and(|g| gangs.contains(g)) {
                prop_assert!(killed.contains(j.id.as_str()), "{} shares a gang", j.id);
            }
        }
        // Freed GPUs add up: the killed jobs' GPUs, and exactly the GPUs they held.
        let held: u32 = c.nodes.iter().flat_map(|n| &n.gpus).filter(|g| g.job.as_deref().is_some_and(|id| killed.contains(id))).count() as u32;
        prop_assert_eq!(b.gpus_freed, held);
    }

    #[test]
    fn estimates_are_never_before_now(c in arb_cluster()) {
        let p = plan(&c, &site(), &crate::engine::plan::Unusable::default());
        for e in p.estimates.iter().flatten() {
            if let Some(s) = e.start() {
                prop_assert!(s >= c.time);
            }
        }
    }
}

/// A domain whose nodes are in two partitions: the partition's share
/// counts its own nodes' GPUs alone, of the partition that loses the most
/// (issue 39: "200.0% of partition a100 (16 of 8)", an H100 node's GPUs
/// counted against the A100 partition).
#[test]
fn a_domains_blast_counts_each_partitions_own_gpus() {
    use crate::model::Domain;
    let mut c = cluster();
    add_node(&mut c, "a1", "a100", 8);
    add_node(&mut c, "h1", "h100", 8);
    add_node(&mut c, "h2", "h100", 8);
    add_node(&mut c, "h3", "h100", 8);
    for n in ["a1", "h1", "h2"] {
        let node = c.nodes.iter_mut().find(|x| x.name == n).expect("node");
        std::sync::Arc::make_mut(node).domains = vec![Domain::new("leaf", "leaf-b")].into();
    }
    let b = blast_domain(&c, &base_of(&c), "leaf-b", true, &site()).expect("blast");
    let p = b.partition.expect("partition");
    assert_eq!(
        (p.name.as_str(), p.gpus_removed, p.gpus_total),
        ("h100", 16, 24)
    );
    // The share is of the partition's own GPUs (issue 58: 24 of 24 was
    // said as 100 %, 16 of 8 as 200 %).
    assert!((p.share - 16.0 / 24.0).abs() < 1e-9, "{}", p.share);
    assert_eq!(b.cluster.gpus_removed, 24);
    // Per partition, never over the whole: the A100 one alone.
    let mut c2 = c.clone();
    for n in ["h1", "h2"] {
        let node = c2.nodes.iter_mut().find(|x| x.name == n).expect("node");
        std::sync::Arc::make_mut(node).domains = Default::default();
    }
    let a = c2.nodes.iter_mut().find(|x| x.name == "a1").expect("a1");
    std::sync::Arc::make_mut(a).domains = vec![Domain::new("leaf", "leaf-b")].into();
    add_node(&mut c2, "h4", "h100", 8);
    let h4 = c2.nodes.iter_mut().find(|x| x.name == "h4").expect("h4");
    std::sync::Arc::make_mut(h4).domains = vec![Domain::new("leaf", "leaf-b")].into();
    let b = blast_domain(&c2, &base_of(&c2), "leaf-b", true, &site()).expect("blast");
    let p = b.partition.expect("partition");
    assert!(p.share <= 1.0 + 1e-9, "{p:?}");
}

/// Lowering a priority below the jobs behind it: it falls behind them,
/// and is never said to jump them (issue 58, seen on Slurm 22.05: job 9
/// at 4294901760, `priority 9 5000` said "jobs it jumps: 1, 3").
#[test]
fn lowering_a_priority_falls_behind_the_jobs_between() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    run(&mut c, "r", &["n1"], 8, 0, 1000);
    pend(&mut c, "top", "p", 1, 8, 4_294_901_760);
    pend(&mut c, "a", "p", 1, 8, 50_000);
    pend(&mut c, "b", "p", 1, 8, 40_000);
    let r = blast(
        &c,
        &base_of(&c),
        &Target::Priority {
            job: "top".into(),
            value: 5000,
        },
        &site(),
    )
    .expect("blast");
    assert!(r.jumped.is_empty(), "{:?}", r.jumped);
    assert_eq!(r.falls_behind, vec!["a".to_string(), "b".to_string()]);
    let said = crate::report::blast(&r);
    assert!(said.contains("jobs it falls behind: a, b"), "{said}");
    assert!(!said.contains("jumps"), "{said}");
}
