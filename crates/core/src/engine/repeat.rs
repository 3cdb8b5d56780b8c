//! Nodes that keep failing (issue 29): each node's hardware faults over a
//! window — the snapshot's events and what a source remembers from before
//! them (`Cluster::history`: Prometheus's last 30 days) — counted by kind,
//! and the nodes past the site's `repeat_offender` rule ("3 in 30d"): the
//! options recommend taking those out for repair instead of another reboot.
//!
//! Pure: a function of the snapshot, the Xid catalog and the rule.

use super::xid::XidCatalog;
use crate::model::{Cluster, EventKind, Fault, PastFault, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How many faults of one kind in how long make a node a repeat offender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepeatRule {
    pub count: u32,
    pub window_s: i64,
}

impl Default for RepeatRule {
    /// Three of a kind in 30 days.
    fn default() -> Self {
        RepeatRule {
            count: 3,
            window_s: 30 * 86_400,
        }
    }
}

impl RepeatRule {
    /// `3 in 30d` (any duration nightshift reads: `30d`, `720h`).
    pub fn parse(text: &str) -> Result<RepeatRule, String> {
        let bad = || format!("{text:?}: want COUNT in DURATION, e.g. \"3 in 30d\"");
        let (n, d) = text.split_once(" in ").ok_or_else(bad)?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count < 2 {
            return Err(format!("{text:?}: a repeat offender has at least 2 faults"));
        }
        // The window needs its unit: "3 in 30" is 30 seconds to the
        // parser and 30 days to whoever wrote it.
        if d.trim().chars().all(|c| c.is_ascii_digit() || c == '.') {
            return Err(format!(
                "{text:?}: give the window its unit (\"{} in {}d\" for days)",
                n.trim(),
                d.trim()
            ));
        }
        let window_s =
            super::units::parse_duration(d.trim()).map_err(|e| format!("{text:?}: {e}"))?;
        if window_s == 0 || window_s > 366 * 86_400 {
            return Err(format!("{text:?}: the window is from 1s to 366d"));
        }
        Ok(RepeatRule {
            count,
            window_s: window_s as i64,
        })
    }

    /// `30 days`, `12h`.
    pub fn window(&self) -> String {
        if self.window_s % 86_400 == 0 {
            let d = self.window_s / 86_400;
            format!("{d} day{}", if d == 1 { "" } else { "s" })
        } else {
            super::super::text::duration(self.window_s)
        }
    }
}

/// Two readings of one fault (the source's event and Prometheus's sample
/// of the same Xid, an hour apart at most) are one fault.
const SAME_FAULT_S: i64 = 3600;

/// One kind of fault on a node, in the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offense {
    /// `Xid 79`.
    pub fault: String,
    #[serde(skip)]
    pub kind: Fault,
    pub count: u32,
    /// When, oldest first.
    pub times: Vec<Timestamp>,
    /// The GPUs it hit.
    pub gpus: Vec<u32>,
}

/// A node's faults in the window, most frequent first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeHistory {
    pub node: String,
    pub window_s: i64,
    pub faults: Vec<Offense>,
    /// Past the rule: the fault that makes it one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat_offender: Option<String>,
    /// One line: "3rd Xid 79 in 30 days (11-08, 11-20, 12-02)".
    pub line: String,
    /// The catalog's remedy class of its newest fault (a DBE or a remap
    /// failure: a reboot's).
    #[serde(skip)]
    pub last_remedy: super::xid::ActionClass,
}

impl NodeHistory {
    pub fn is_repeat_offender(&self) -> bool {
        self.repeat_offender.is_some()
    }
}

/// `1st`, `2nd`, `3rd`, `11th`, `22nd`.
pub fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The faults among the snapshot's events and its GPUs' last Xids (a
/// source may report the Xid without an event), every Xid code: which
/// are the hardware's is the catalog's to say (`past_faults`).
pub fn event_faults(c: &Cluster) -> Vec<PastFault> {
    let mut out = Vec::new();
    for n in &c.nodes {
        for (gpu, code, time) in last_xids(n) {
            out.push(PastFault {
                time: time.unwrap_or(c.time),
                node: n.name.clone(),
                gpu: Some(gpu),
                fault: Fault::Xid(code),
                from: "events".into(),
            });
        }
    }
    out.extend(event_faults_of_events(c));
    out
}

/// A node's GPUs' last Xids: (GPU, code, when). One without a time is the
/// snapshot's (a source that reports the Xid but not when).
fn last_xids(n: &crate::model::Node) -> impl Iterator<Item = (u32, u32, Option<Timestamp>)> + '_ {
    n.gpus
        .iter()
        .filter_map(|g| g.last_xid.as_ref().map(|x| (g.index, x.code, x.time)))
}

/// The faults among the snapshot's events.
fn event_faults_of_events(c: &Cluster) -> Vec<PastFault> {
    let mut out = Vec::new();
    for e in &c.events {
        let fault = match &e.kind {
            EventKind::Xid { code } => Fault::Xid(*code),
            EventKind::Ecc { dbe, .. } if dbe.unwrap_or(0) > 0 => Fault::Dbe,
            EventKind::Ecc {
                remap_failed: Some(true),
                ..
            } => Fault::RemapFailed,
            _ => continue,
        };
        out.push(PastFault {
            time: e.time,
            node: e.node.clone(),
            gpu: e.gpu,
            fault,
            from: "events".into(),
        });
    }
    out
}

/// The faults of a run of snapshots (a recording's), each once: a source
/// keeps its newest events only, so a night's history is gathered as it
/// goes by.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct FaultLog {
    seen: std::collections::BTreeSet<(String, Option<u32>, Fault, Timestamp)>,
    /// Each node's GPUs whose last Xid carries no time, as last read (the
    /// snapshot's time is theirs, so they are taken again each snapshot).
    /// A node that is the same shared record as last time is not read
    /// again: at 10,000 nodes reading all 80,000 GPUs each snapshot was a
    /// sixteenth of the report's CPU (issue 42).
    #[serde(skip)]
    timeless: super::changed::PerRecord<crate::model::Node, Vec<(u32, u32)>>,
}

impl FaultLog {
    /// Takes in the faults of `c` (as [`event_faults`] finds them).
    pub fn add(&mut self, c: &Cluster) {
        let seen = &mut self.seen;
        self.timeless.update(&c.nodes, |n| {
            let mut timeless = Vec::new();
            for (gpu, code, time) in last_xids(n) {
                match time {
                    Some(t) => {
                        seen.insert((n.name.clone(), Some(gpu), Fault::Xid(code), t));
                    }
                    None => timeless.push((gpu, code)),
                }
            }
            timeless
        });
        for (n, part) in c.nodes.iter().zip(self.timeless.parts()) {
            for &(gpu, code) in part {
                seen.insert((n.name.clone(), Some(gpu), Fault::Xid(code), c.time));
            }
        }
        for f in event_faults_of_events(c) {
            seen.insert((f.node, f.gpu, f.fault, f.time));
        }
    }

    /// Forgets the faults before `t` (older than any window asks).
    pub fn forget_before(&mut self, t: Timestamp) {
        if self.seen.iter().any(|f| f.3 < t) {
            self.seen.retain(|f| f.3 >= t);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// The faults, each as a past fault read from the events.
    pub fn faults(&self) -> impl Iterator<Item = PastFault> + '_ {
        self.seen.iter().map(|(node, gpu, fault, time)| PastFault {
            time: *time,
            node: node.clone(),
            gpu: *gpu,
            fault: *fault,
            from: "events".into(),
        })
    }

    pub fn into_faults(self) -> Vec<PastFault> {
        self.seen
            .into_iter()
            .map(|(node, gpu, fault, time)| PastFault {
                time,
                node,
                gpu,
                fault,
                from: "events".into(),
            })
            .collect()
    }
}

/// Every hardware fault the snapshot knows of, each once: its history and
/// its events, a fault read by both (within an hour, same GPU) counted
/// once. Sorted by node, fault, GPU, time.
pub fn past_faults(c: &Cluster, cat: &XidCatalog) -> Vec<PastFault> {
    let hardware = |f: &PastFault| match f.fault {
        Fault::Xid(code) => cat.action(code).needs_drain(),
        _ => true,
    };
    let mut all: Vec<PastFault> = c.history.iter().filter(|f| hardware(f)).cloned().collect();
    all.extend(event_faults(c).into_iter().filter(|f| hardware(f)));
    all.sort_by(|a, b| (&a.node, a.fault, a.gpu, a.time).cmp(&(&b.node, b.fault, b.gpu, b.time)));
    let mut out: Vec<PastFault> = Vec::with_capacity(all.len());
    for f in all {
        let same = out.last().is_some_and(|p: &PastFault| {
            p.node == f.node
                && p.fault == f.fault
                && p.gpu == f.gpu
                && f.time - p.time <= SAME_FAULT_S
        });
        if !same {
            out.push(f);
        }
    }
    out
}

/// Each node's faults within the rule's window before the snapshot's time
/// (nodes with none are left out).
pub fn histories(
    c: &Cluster,
    cat: &XidCatalog,
    rule: &RepeatRule,
) -> BTreeMap<String, NodeHistory> {
    let since = c.time - rule.window_s;
    let mut by_node: BTreeMap<String, BTreeMap<Fault, Offense>> = BTreeMap::new();
    for f in past_faults(c, cat) {
        if f.time < since || f.time > c.time {
            continue;
        }
        let o = by_node
            .entry(f.node.clone())
            .or_default()
            .entry(f.fault)
            .or_insert_with(|| Offense {
                fault: f.fault.label(),
                kind: f.fault,
                count: 0,
                times: Vec::new(),
                gpus: Vec::new(),
            });
        o.count += 1;
        o.times.push(f.time);
        if let Some(g) = f.gpu
            && !o.gpus.contains(&g)
        {
            o.gpus.push(g);
        }
    }
    by_node
        .into_iter()
        .map(|(node, faults)| {
            let mut faults: Vec<Offense> = faults.into_values().collect();
            for o in &mut faults {
                o.times.sort_unstable();
                o.gpus.sort_unstable();
            }
            faults.sort_by(|a, b| b.count.cmp(&a.count).then(a.kind.cmp(&b.kind)));
            let worst = &faults[0];
            let dates: Vec<String> = worst.times.iter().map(|&t| day(t)).collect();
            let line = format!(
                "{} {} in {} ({})",
                ordinal(worst.count),
                worst.fault,
                rule.window(),
                dates.join(", ")
            );
            let repeat_offender = (worst.count >= rule.count).then(|| {
                format!(
                    "{line}: {} or more of a kind in {} make a repeat offender",
                    rule.count,
                    rule.window()
                )
            });
            let newest = faults
                .iter()
                .filter_map(|o| o.times.last().map(|&t| (t, o.kind)))
                .max_by_key(|(t, _)| *t)
                .map(|(_, k)| k);
            let last_remedy = match newest {
                Some(Fault::Xid(code)) => cat.action(code),
                _ => super::xid::ActionClass::DrainReboot,
            };
            let h = NodeHistory {
                node: node.clone(),
                window_s: rule.window_s,
                faults,
                repeat_offender,
                line,
                last_remedy,
            };
            (node, h)
        })
        .collect()
}

/// `11-08 02:47` (UTC).
fn day(ts: Timestamp) -> String {
    chrono::DateTime::from_timestamp(ts, 0)
        .map(|t| t.format("%m-%d %H:%M").to_string())
        .unwrap_or_else(|| "?".into())
}

/// The diagnostics level a node's check runs at before it goes back: a
/// GPU reset's remedy is checked at level 1 (seconds), a reboot's or an
/// uncorrectable error's at level 2 (about two minutes). One rule for the
/// options' "validate, then resume" and the remedied incident's line.
pub fn check_level(history: Option<&NodeHistory>) -> u8 {
    match history.map(|h| h.last_remedy) {
        Some(super::xid::ActionClass::DrainResetGpu | super::xid::ActionClass::ResetNextDrain) => 1,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Event;

    fn xid(time: Timestamp, node: &str, gpu: u32, code: u32) -> Event {
        Event {
            seq: 0,
            time,
            node: node.into(),
            gpu: Some(gpu),
            kind: EventKind::Xid { code },
            message: String::new(),
            jobs: Vec::new(),
        }
    }

    fn past(time: Timestamp, node: &str, gpu: u32, fault: Fault) -> PastFault {
        PastFault {
            time,
            node: node.into(),
            gpu: Some(gpu),
            fault,
            from: "prometheus".into(),
        }
    }

    const DAY: i64 = 86_400;
    const NOW: i64 = 1_796_000_000;

    #[test]
    fn the_rule_reads_count_in_duration_and_refuses_nonsense() {
        assert_eq!(
            RepeatRule::parse("3 in 30d"),
            Ok(RepeatRule {
                count: 3,
                window_s: 30 * DAY
            })
        );
        assert_eq!(
            RepeatRule::parse("2 in 12h").map(|r| r.window_s),
            Ok(12 * 3600)
        );
        for bad in [
            "3",
            "x in 30d",
            "1 in 30d",
            "3 in forever",
            "3 in 0s",
            "3 in 400d",
        ] {
            assert!(RepeatRule::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(RepeatRule::default().window(), "30 days");
    }

    #[test]
    fn three_xid_79s_in_30_days_make_a_repeat_offender_and_older_ones_do_not_count() {
        let cat = XidCatalog::default();
        let mut c = Cluster {
            time: NOW,
            ..Cluster::default()
        };
        // Two from Prometheus's history (one 40 days old: outside), one
        // of them read again by the source's event 20 minutes later (one
        // fault), and tonight's.
        c.history = vec![
            past(NOW - 40 * DAY, "g1", 3, Fault::Xid(79)),
            past(NOW - 20 * DAY, "g1", 3, Fault::Xid(79)),
            past(NOW - 9 * DAY, "g1", 5, Fault::Xid(79)),
            past(NOW - 9 * DAY, "g2", 0, Fault::Dbe),
        ];
        c.events = vec![
            xid(NOW - 9 * DAY + 1200, "g1", 5, 79),
            xid(NOW - 600, "g1", 3, 79),
            // An application's Xid is not the node's fault.
            xid(NOW - 500, "g2", 1, 13),
            xid(NOW - 400, "g2", 1, 13),
            xid(NOW - 300, "g2", 1, 13),
        ];
        let rule = RepeatRule::default();
        let h = histories(&c, &cat, &rule);
        let g1 = &h["g1"];
        assert_eq!(g1.faults.len(), 1);
        assert_eq!(g1.faults[0].count, 3);
        assert_eq!(g1.faults[0].gpus, vec![3, 5]);
        assert!(
            g1.line.starts_with("3rd Xid 79 in 30 days ("),
            "{}",
            g1.line
        );
        assert!(g1.is_repeat_offender());
        let g2 = &h["g2"];
        assert_eq!(g2.faults[0].fault, "DBE");
        assert_eq!(g2.faults[0].count, 1);
        assert!(!g2.is_repeat_offender());
        // Stricter and looser rules.
        let four = RepeatRule { count: 4, ..rule };
        assert!(!histories(&c, &cat, &four)["g1"].is_repeat_offender());
        let week = RepeatRule::parse("2 in 7d").unwrap();
        assert_eq!(histories(&c, &cat, &week)["g1"].faults[0].count, 1);
    }

    #[test]
    fn ordinals_read_as_english() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111]
            .into_iter()
            .map(ordinal)
            .collect();
        assert_eq!(
            got,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd",
                "101st", "111th"
            ]
        );
    }

    /// The log taken in snapshot by snapshot, reading only the nodes that
    /// changed, holds what reading every GPU of every snapshot finds: the
    /// sim's Xids as they come, and a last Xid without a time (each
    /// snapshot's time is its time) on a node that does not change.
    #[test]
    fn the_fault_log_read_by_changed_nodes_is_every_snapshot_read_whole() {
        use crate::sim::{Sim, SimConfig};
        use std::sync::Arc;
        let mut sim = Sim::new(SimConfig::default()).expect("sim");
        let mut log = FaultLog::default();
        let mut whole = std::collections::BTreeSet::new();
        let mut timeless: Option<Arc<crate::model::Node>> = None;
        for second in 0..900 {
            let mut c = sim.snapshot();
            if second >= 600 {
                let n = timeless.get_or_insert_with(|| {
                    let mut n = (*c.nodes[1]).clone();
                    n.gpus[0].last_xid = Some(Box::new(crate::model::LastXid {
                        code: 48,
                        time: None,
                        message: None,
                    }));
                    Arc::new(n)
                });
                c.nodes[1] = Arc::clone(n);
            }
            log.add(&c);
            for f in event_faults(&c) {
                whole.insert((f.node, f.gpu, f.fault, f.time));
            }
            sim.advance(1);
        }
        assert!(
            whole.iter().any(|f| f.2 == Fault::Xid(48)),
            "the timeless Xid"
        );
        assert!(
            whole.iter().any(|f| f.2 != Fault::Xid(48)),
            "no fault of the sim's own in 900 s"
        );
        assert_eq!(log.seen, whole);
    }
}
