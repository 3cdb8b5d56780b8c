//! The grid's grouping by failure domain and options of several steps.

use super::*;

/// Within each group of the grid (problems first), a failure domain's
/// nodes sit together: a node of h100-01's leaf listed elsewhere in the
/// cluster comes right after it.
#[test]
fn the_grid_keeps_a_domains_nodes_together() {
    let mut app =
        App::new("sim", false, false, Duration::from_secs(10)).measured_by(crate::views::extent);
    let mut c = Sim::new(SimConfig::default()).expect("sim").snapshot();
    let leaf1 = c
        .node("h100-01")
        .and_then(|n| n.domains.first().cloned())
        .expect("leaf");
    let a1 = c
        .nodes
        .iter()
        .position(|n| n.name == "a100-02")
        .expect("a100-02");
    Arc::make_mut(&mut c.nodes[a1]).domains = vec![leaf1];
    let now = Instant::now();
    app.take_in(Msg::Source(Update::Snapshot(Arc::new(c))), now);
    let names: Vec<&str> = app
        .grid
        .iter()
        .map(|&n| app.cluster.nodes[n].name.as_str())
        .collect();
    let at = |n: &str| names.iter().position(|x| *x == n).expect("in the grid");
    assert_eq!(at("a100-02"), at("h100-04") + 1, "{names:?}");
    assert!(at("a100-02") < at("h100-05"), "{names:?}");
}

/// A domain's cordon is one guarded action per node: after each goes
/// through, `n` in its outcome previews the next (each confirmed like any
/// action); a step refused or cancelled ends the chain.
#[test]
fn a_domains_cordon_goes_node_by_node_with_n_after_each() {
    let mut a =
        App::new("sim", false, false, Duration::from_secs(10)).measured_by(crate::views::extent);
    let mut sim = Sim::new(SimConfig::default()).expect("sim");
    sim.advance(1230);
    let c = Arc::new(sim.snapshot());
    let now = Instant::now();
    a.take_in(Msg::Source(Update::Snapshot(c.clone())), now);
    a.take_in(Msg::Source(Update::ok(Origin::Scheduler)), now);
    let an = Analysis::compute(
        &c,
        None,
        &Focus::Node("ib-leaf-2".into()),
        &crate::engine::SiteParams::default(),
        &XidCatalog::default(),
    );
    a.take_in(Msg::Analysis(Arc::new(an)), now);
    a.modal = Some(Modal::Options {
        target: "ib-leaf-2".into(),
    });
    press(&mut a, "1");
    let cordon = |n: &str| Action::Cordon {
        node: n.into(),
        reason: "ib-leaf-2 failing: fabric, not the GPUs".into(),
    };
    assert!(
        matches!(&a.modal, Some(Modal::Confirm { action, .. }) if *action == cordon("h100-05")),
        "{:?}",
        a.modal
    );
    assert_eq!(a.next_steps.len(), 5, "three more cordons, two requeues");
    let done = |what: &str| crate::actions::guard::Done {
        outcome: crate::actions::audit::Outcome::of_steps(vec![crate::model::Step {
            what: what.into(),
            ok: true,
            verified: true,
            observed: "cordoned".into(),
            error: None,
            unchanged: false,
            refused: None,
        }]),
        undo: None,
        message: "done".into(),
    };
    a.take_in(
        Msg::Action(crate::actions::runner::Reply::Done(Box::new(done(
            "cordon h100-05",
        )))),
        a.now,
    );
    press(&mut a, "n");
    assert!(
        matches!(&a.modal, Some(Modal::Confirm { action, .. }) if *action == cordon("h100-06")),
        "{:?}",
        a.modal
    );
    // Cancelled: the chain ends; n after an outcome opens nothing.
    key(&mut a, KeyCode::Esc);
    assert!(a.next_steps.is_empty());
    a.take_in(
        Msg::Action(crate::actions::runner::Reply::Done(Box::new(done("x")))),
        a.now,
    );
    press(&mut a, "n");
    assert!(a.modal.is_none(), "{:?}", a.modal);
}
