use super::*;
use crate::model::{Job, Node};

#[test]
fn narrow_screens_drop_low_value_columns_and_wide_ones_share_by_priority() {
    let natural: Vec<u16> = vec![8, 8, 5, 8, 12, 4, 6, 3, 4, 40];
    let at = |w| layout(NODES, &natural, w);
    let shown = |v: &[Option<u16>]| -> Vec<&str> {
        NODES
            .iter()
            .zip(v)
            .filter(|(_, w)| w.is_some())
            .map(|(c, _)| c.name)
            .collect()
    };
    let narrow = at(60);
    assert!(shown(&narrow).contains(&"NAME") && shown(&narrow).contains(&"HEALTH"));
    assert!(
        !shown(&narrow).contains(&"TEMP"),
        "TEMP goes first: {:?}",
        shown(&narrow)
    );
    let total: u16 = narrow.iter().flatten().sum::<u16>() + shown(&narrow).len() as u16 - 1;
    assert!(total <= 60, "{total}");
    let wide = at(200);
    assert_eq!(shown(&wide).len(), NODES.len(), "all fit");
    // NAME gets what its content needs, no more; the fill column the rest.
    assert_eq!(wide[0], Some(8));
    let total: u16 = wide.iter().flatten().sum::<u16>() + NODES.len() as u16 - 1;
    assert_eq!(total, 200);
}

proptest::proptest! {
    /// Any widths and contents: never a panic, never wider than given
    /// when the columns that cannot be dropped fit.
    #[test]
    fn layout_never_panics(width in 0u16..400, natural in proptest::collection::vec(0u16..200, 13)) {
        let v = layout(GPUS, &natural, width);
        let shown: Vec<u16> = v.iter().flatten().copied().collect();
        let total: u32 = shown.iter().map(|&w| u32::from(w)).sum::<u32>() + shown.len().saturating_sub(1) as u32;
        let floor: u32 = GPUS.iter().filter(|c| c.priority == 0).map(|c| u32::from(c.min) + 1).sum();
        if u32::from(width) >= floor {
            proptest::prop_assert!(total <= u32::from(width), "{total} > {width}");
        }
    }
}

#[test]
fn a_cut_value_says_so() {
    assert_eq!(fit("h100-03", 7), "h100-03");
    assert_eq!(fit("h100-03", 6), "h100-…");
    assert_eq!(fit("a-very-long-job-name", 8), "a-very-…");
    assert_eq!(fit("x", 0), "");
}

/// The sim's night and its engine base.
fn sim_night() -> (Cluster, Base) {
    use crate::sim::{Sim, SimConfig};
    let c = Sim::new(SimConfig::default()).expect("sim").snapshot();
    let base = Base::compute(
        &c,
        None,
        &crate::engine::SiteParams::default(),
        &crate::engine::xid::XidCatalog::default(),
    );
    (c, base)
}

#[test]
fn filters_on_any_column_inverse_and_by_field() {
    let (c, base) = sim_night();
    let ctx = Ctx {
        cluster: &c,
        base: Some(&base),
        stale_after_s: 60,
    };
    let jobs = |f: &str| -> Vec<&str> {
        c.jobs
            .iter()
            .filter(|j| matches(&ctx, JOBS, j, f))
            .map(|j| j.id.as_str())
            .collect()
    };
    let alice = jobs("alice");
    assert!(alice.contains(&"4700"));
    assert!(jobs("!alice").iter().all(|id| !alice.contains(id)));
    let pending = jobs("state:pending");
    assert!(!pending.is_empty());
    assert!(
        pending
            .iter()
            .all(|id| c.job(id).is_some_and(|j| j.state.is_pending()))
    );
    let crit: Vec<&Gpu> = c
        .gpus()
        .map(|(_, g)| g)
        .filter(|g| matches(&ctx, GPUS, g, "crit"))
        .collect();
    assert_eq!(crit.len(), 1, "the Xid 79 GPU");
    let x79: Vec<&Gpu> = c
        .gpus()
        .map(|(_, g)| g)
        .filter(|g| matches(&ctx, GPUS, g, "lastxid:79"))
        .collect();
    assert_eq!((&*x79[0].node, x79[0].index), ("h100-03", 3));
    let drained: Vec<&Node> = c
        .nodes
        .iter()
        .map(|n| &**n)
        .filter(|n| matches(&ctx, NODES, n, "drain"))
        .collect();
    assert_eq!(drained.len(), 1);
}

/// The analyst plans big clusters every few seconds, so the rows may come
/// from a newer snapshot than the plan: a job's estimate follows its id,
/// not its position, when jobs before it have left the list.
#[test]
fn a_pending_jobs_eta_follows_its_id_when_the_list_has_moved() {
    let (c, base) = sim_night();
    let eta_col = JOBS.iter().find(|col| col.name == "ETA").expect("ETA");
    let cell = |cluster: &Cluster, j: &Job| {
        let ctx = Ctx {
            cluster,
            base: Some(&base),
            stale_after_s: 60,
        };
        (eta_col.cell)(&ctx, j).text
    };
    let before: Vec<(String, String)> = c
        .jobs
        .iter()
        .filter(|j| j.state.is_pending())
        .map(|j| (j.id.clone(), cell(&c, j)))
        .collect();
    // Differing estimates, or the test could not tell positions apart.
    let distinct: std::collections::HashSet<&String> = before.iter().map(|(_, e)| e).collect();
    assert!(distinct.len() > 2, "{before:?}");
    // A newer snapshot: the first three jobs have left, the rest moved up.
    let mut later = c.clone();
    later.jobs.drain(..3);
    for (id, eta) in &before {
        if let Some(j) = later.jobs.iter().find(|j| &j.id == id) {
            assert_eq!(&cell(&later, j), eta, "job {id}");
        }
    }
}
