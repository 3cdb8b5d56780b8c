//! Kubernetes schedulers' own words, parsed: kube-scheduler's
//! `FailedScheduling` message, Kueue's Workload conditions, Volcano's
//! PodGroup conditions — turned into what the on-call reads.

/// kube-scheduler's `0/64 nodes are available: 8 Insufficient
/// nvidia.com/gpu, 56 node(s) had untolerated taint {…}. preemption: …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedScheduling {
    pub available: u32,
    pub total: u32,
    /// (node count, reason as the scheduler wrote it), biggest first.
    pub reasons: Vec<(u32, String)>,
    /// The preemption part, when present.
    pub preemption: Option<String>,
}

/// Splits at commas that are not inside `{…}` (taints carry commas).
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '{' | '[' | '(' => depth += 1,
            '}' | ']' | ')' => depth -= 1,
            ',' if depth <= 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

pub fn parse_failed_scheduling(msg: &str) -> Option<FailedScheduling> {
    let (head, rest) = msg.split_once(" nodes are available")?;
    let (avail, total) = head.trim().rsplit(' ').next()?.split_once('/')?;
    let (available, total) = (avail.parse().ok()?, total.parse().ok()?);
    let rest = rest.trim_start_matches(':').trim();
    let (body, preemption) = match rest.split_once("preemption:") {
        Some((b, p)) => (b, Some(p.trim().trim_end_matches('.').to_string())),
        None => (rest, None),
    };
    let body = body.trim().trim_end_matches('.');
    let mut reasons: Vec<(u32, String)> = split_top(body)
        .into_iter()
        .filter_map(|part| {
            let part = part.trim();
            let (n, what) = part.split_once(' ')?;
            Some((n.parse().ok()?, what.trim().to_string()))
        })
        .collect();
    reasons.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    Some(FailedScheduling {
        available,
        total,
        reasons,
        preemption,
    })
}

/// One of kube-scheduler's per-node reasons in the on-call's words.
pub fn node_reason(r: &str) -> String {
    let r = r.trim();
    if let Some(res) = r.strip_prefix("Insufficient ") {
        return format!("too few free {res}");
    }
    if let Some(t) = r.strip_prefix("node(s) had untolerated taint ") {
        let t = t.trim_matches(|c| c == '{' || c == '}');
        return match t.split(':').next().map(str::trim) {
            Some("node.kubernetes.io/unreachable") => "unreachable".into(),
            Some("node.kubernetes.io/not-ready") => "not ready".into(),
            Some("node.kubernetes.io/unschedulable") => "cordoned".into(),
            _ => format!("tainted {t}"),
        };
    }
    match r {
        "node(s) were unschedulable" => "cordoned".into(),
        "node(s) didn't match Pod's node affinity/selector" => {
            "outside the pod's node selector/affinity".into()
        }
        "node(s) didn't match pod topology spread constraints" => {
            "would break its topology spread".into()
        }
        "node(s) had volume node affinity conflict" => "its volume is elsewhere".into(),
        _ => r.trim_start_matches("node(s) ").to_string(),
    }
}

/// kube-scheduler's message in plain words.
pub fn explain_failed_scheduling(f: &FailedScheduling) -> String {
    let parts: Vec<String> = f
        .reasons
        .iter()
        .map(|(n, r)| format!("{n} {}", node_reason(r)))
        .collect();
    let mut s = format!(
        "kube-scheduler found {} of {} nodes usable: {}",
        f.available,
        f.total,
        parts.join(", ")
    );
    if let Some(p) = &f.preemption {
        if p.contains("No preemption victims") || p.contains("not helpful") {
            s.push_str("; preempting lower-priority pods would not help");
        } else {
            s.push_str(&format!("; preemption: {p}"));
        }
    }
    s
}

/// Kueue's `QuotaReserved` message (`couldn't assign flavors to pod set
/// main: insufficient unused quota for nvidia.com/gpu in flavor a100, 4
/// more needed`) in plain words.
pub fn explain_kueue(m: &str) -> String {
    // `#2 in ClusterQueue team-a-cq: …`: its place in line, from Kueue's
    // visibility API.
    if let Some(rest) = m.strip_prefix('#')
        && let Some((place, msg)) = rest.split_once(": ")
        && let Some((n, cq)) = place.split_once(" in ClusterQueue ")
    {
        let ahead = n.parse::<u64>().map_or(String::new(), |n| match n {
            1 => " (first in line)".to_string(),
            n => format!(" ({} ahead of it)", n - 1),
        });
        return format!("{}; #{n} in ClusterQueue {cq}{ahead}", explain_kueue(msg));
    }
    // Kueue's reasons that no capacity resolves, in its own word.
    for (word, what) in [
        ("Deactivated", "its workload is deactivated"),
        ("OnHold", "Kueue holds it"),
        (
            "NoMatchingFlavor",
            "no ResourceFlavor of its ClusterQueue matches it",
        ),
        (
            "TopologyPlacementFailed",
            "its required topology cannot be placed",
        ),
        (
            "WaitingForPreemptedWorkloads",
            "it waits for the workloads preempted for it to end",
        ),
    ] {
        if let Some(rest) = m.strip_prefix(word).and_then(|r| r.strip_prefix(": ")) {
            return format!("Kueue ({word}): {what} — {rest}");
        }
    }
    let m = m.strip_prefix("WaitingForQuota: ").unwrap_or(m);
    if let Some(i) = m.find("insufficient unused quota for ") {
        let rest = &m[i + "insufficient unused quota for ".len()..];
        let (resource, rest) = rest.split_once(" in flavor ").unwrap_or((rest, ""));
        let (flavor, more) = rest.split_once(',').unwrap_or((rest, ""));
        let more = more.trim().trim_end_matches('.');
        return format!(
            "Kueue: its ClusterQueue has no unused {resource} quota in flavor {}{}",
            flavor.trim(),
            if more.is_empty() {
                String::new()
            } else {
                format!(" ({more})")
            }
        );
    }
    if m.contains("insufficient quota") {
        return format!("Kueue: the request is larger than the ClusterQueue's quota ({m})");
    }
    if m.starts_with("evicted") {
        return format!("Kueue {m}; it queues again");
    }
    format!("Kueue says: {m}")
}

/// Volcano's `3/4 tasks in gang unschedulable: …` in plain words.
pub fn explain_volcano(m: &str) -> String {
    if let Some((frac, _)) = m.split_once(" tasks in gang unschedulable")
        && let Some((bad, all)) = frac.trim().split_once('/')
    {
        return format!(
            "Volcano: the gang starts only when all {all} pods fit at once; {bad} of them cannot be placed now"
        );
    }
    format!("Volcano says: {m}")
}

/// A Kubernetes reason (as the kube source writes `Job::reason`) in plain
/// words; `None` when it is not one.
pub fn explain(r: &str) -> Option<String> {
    if let Some(m) = r.strip_prefix("Kueue: ") {
        return Some(explain_kueue(m));
    }
    if let Some(m) = r.strip_prefix("Volcano: ") {
        return Some(explain_volcano(m));
    }
    if r == "WorkloadInactive" {
        return Some(
            "its Kueue workload is deactivated (spec.active: false): it waits until reactivated"
                .into(),
        );
    }
    parse_failed_scheduling(r).map(|f| explain_failed_scheduling(&f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_scheduling_splits_into_counted_reasons_with_taints_intact() {
        let m = "0/64 nodes are available: 8 Insufficient nvidia.com/gpu, 56 node(s) had untolerated taint {nvidia.com/gpu-xid: 79}. preemption: 0/64 nodes are available: 64 Preemption is not helpful for scheduling.";
        let f = parse_failed_scheduling(m).unwrap();
        assert_eq!((f.available, f.total), (0, 64));
        assert_eq!(
            f.reasons,
            vec![
                (
                    56,
                    "node(s) had untolerated taint {nvidia.com/gpu-xid: 79}".into()
                ),
                (8, "Insufficient nvidia.com/gpu".into())
            ]
        );
        let e = explain_failed_scheduling(&f);
        assert!(e.contains("0 of 64 nodes usable: 56 tainted nvidia.com/gpu-xid: 79, 8 too few free nvidia.com/gpu"), "{e}");
        assert!(e.contains("would not help"), "{e}");
    }

    #[test]
    fn a_taint_with_commas_inside_braces_is_one_reason() {
        let m = "0/3 nodes are available: 2 node(s) had untolerated taint {a: b, c}, 1 node(s) were unschedulable.";
        let f = parse_failed_scheduling(m).unwrap();
        assert_eq!(f.reasons.len(), 2);
        assert_eq!(node_reason(&f.reasons[1].1), "cordoned");
    }

    #[test]
    fn kueue_and_volcano_read_plainly() {
        let k = explain("Kueue: couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor a100, 4 more needed").unwrap();
        assert_eq!(
            k,
            "Kueue: its ClusterQueue has no unused nvidia.com/gpu quota in flavor a100 (4 more needed)"
        );
        let v = explain("Volcano: 3/4 tasks in gang unschedulable: pod group is not ready, 1 Pending, 4 minAvailable").unwrap();
        assert!(v.contains("all 4 pods") && v.contains("3 of them"), "{v}");
        assert_eq!(explain("Resources"), None);
        let placed = explain("Kueue: #3 in ClusterQueue team-a-cq: couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor a100, 4 more needed").unwrap();
        assert!(
            placed.ends_with("(4 more needed); #3 in ClusterQueue team-a-cq (2 ahead of it)"),
            "{placed}"
        );
    }
}
