//! The consistency check of issue 39 for a recording of a live backend
//! (the Slurm labs, kube-lab): the one analysis of its last moment —
//! computed in process from the recording, its memory fed every snapshot
//! in order as the console's analyst is fed — is what the command line's
//! surfaces print for that moment.

use serde_json::Value;
use std::path::Path;

fn json(dir: &Path, args: &[&str]) -> Value {
    let out = super::nightshift(dir, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// Compares, at the recording's end: every incident (every field), each
/// node's recommended option (up to `max_nodes`, incidents' nodes first)
/// and each waiting job's `why` (up to three). Returns how many answers
/// were compared.
///
/// And issue 58's rule on the live backend: each of those nodes' and of
/// up to three running jobs' recommended option, its first step dry-run
/// through the guard against the backend itself (`live` runs nightshift
/// there), is not refused.
pub fn one_answer_at_the_end(
    dir: &Path,
    file: &Path,
    max_nodes: usize,
    live: &dyn Fn(&[&str]) -> (bool, String),
) -> usize {
    use nightshift::engine::memory::Memory;
    let rec = nightshift::recording::Recording::open(file).expect("open");
    let site = nightshift::engine::SiteParams::default();
    let cat = nightshift::engine::xid::XidCatalog::default();
    let mut memory = Memory::default();
    let mut last = None;
    for c in rec.states() {
        let c = c.expect("state");
        memory.observe(&c, &site);
        last = Some(c);
    }
    let c = last.expect("a snapshot");
    let b = memory.base(&c, &site, &cat);
    let f = file.to_str().expect("path");
    let replay = |rest: &[&str]| -> Value {
        let mut args = vec!["--replay", f];
        args.extend_from_slice(rest);
        json(dir, &args)
    };
    let mut compared = 0;
    let got = replay(&["get", "incidents", "-o", "json"]);
    assert_eq!(
        got["items"],
        serde_json::to_value(&b.incidents).expect("json"),
        "get incidents"
    );
    compared += b.incidents.len();
    let mut nodes: Vec<String> = b.incidents.iter().map(|i| i.node.clone()).collect();
    nodes.extend(c.nodes.iter().map(|n| n.name.clone()));
    nodes.dedup();
    let mut asked = std::collections::BTreeSet::new();
    for node in nodes.into_iter().filter(|n| c.node(n).is_some()) {
        if asked.len() == max_nodes || !asked.insert(node.clone()) {
            continue;
        }
        let recommended = nightshift::engine::options::node_options(&c, &b, &node, &site)
            .ok()
            .and_then(|o| o.options.into_iter().find(|x| x.recommended));
        dry_run_passes(live, recommended.as_ref(), &node);
        let engine = recommended.map(|x| x.name.to_string());
        let cli = replay(&["options", &node, "-o", "json"]);
        let pick = cli["options"]
            .as_array()
            .and_then(|o| o.iter().find(|x| x["recommended"] == true))
            .and_then(|x| x["name"].as_str())
            .map(str::to_string);
        assert_eq!(pick, engine, "options {node}");
        compared += 1;
    }
    for job in c.jobs.iter().filter(|j| j.state.holds_resources()).take(3) {
        let recommended = nightshift::engine::options::job_options(&c, &b, &job.id, None, &site)
            .ok()
            .and_then(|o| o.options.into_iter().find(|x| x.recommended));
        dry_run_passes(live, recommended.as_ref(), &job.id);
    }
    for (j, job) in c
        .jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| j.state.is_pending())
        .take(3)
    {
        let w = nightshift::engine::why::why(&c, j, &b).expect("why");
        let cli = replay(&["why", &job.id, "-o", "json"]);
        assert_eq!(
            cli,
            serde_json::to_value(&w).expect("json"),
            "why {}",
            job.id
        );
        compared += 1;
    }
    compared
}

/// The recommended option's first step (what its key opens), dry-run
/// through the guard against the live backend: not refused.
fn dry_run_passes(
    live: &dyn Fn(&[&str]) -> (bool, String),
    recommended: Option<&nightshift::engine::options::Choice>,
    target: &str,
) {
    let Some(r) = recommended else {
        return;
    };
    let Some(step) = r.steps.first() else {
        return;
    };
    let words = super::sent::shell_words(&step.command_line());
    let mut args: Vec<&str> = words.iter().skip(1).map(String::as_str).collect();
    args.push("--dry-run");
    let (_, out) = live(&args);
    assert!(
        !out.lines().any(|l| l.starts_with("refused:")),
        "{target}: recommended {} ({}), and the guard refuses its dry run {args:?}:\n{out}",
        r.name,
        r.title
    );
}
