//! The node columns.

use super::{Cell, Column, Key, Tone, num, tone_of, txt};
use crate::model::{GpuHealth, Node, NodeState};
use crate::text::{self, sanitize};

// ---- nodes ----------------------------------------------------------------

fn node_state_tone(s: NodeState) -> Tone {
    match s {
        NodeState::Up => Tone::Ok,
        NodeState::Cordoned | NodeState::Draining | NodeState::Reserved => Tone::Warn,
        NodeState::Drain | NodeState::Down | NodeState::Unknown => Tone::Critical,
    }
}

fn domains_of(n: &Node) -> String {
    let names: Vec<&str> = n.domains.iter().map(|d| d.name.as_str()).collect();
    if names.is_empty() {
        "-".into()
    } else {
        names.join(",")
    }
}

fn node_max_temp(n: &Node) -> Option<f64> {
    n.gpus
        .iter()
        .filter_map(|g| g.temperature_c)
        .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.max(t))))
}

/// Uncorrectable (double-bit) errors on the node's GPUs; unknown when no
/// GPU reported a count (never a made-up 0).
fn node_dbe(n: &Node) -> Option<u64> {
    let known: Vec<u64> = n
        .gpus
        .iter()
        .filter_map(|g| g.ecc.dbe_volatile.get())
        .collect();
    (!known.is_empty()).then(|| known.iter().sum())
}

pub const NODES: &[Column<Node>] = &[
    Column {
        name: "NAME",
        priority: 0,
        min: 8,
        max: 24,
        fill: false,
        cell: |_, n| Cell::plain(sanitize(&n.name)),
        sort: |_, n| txt(&n.name),
    },
    Column {
        name: "STATE",
        priority: 0,
        min: 8,
        max: 8,
        fill: false,
        cell: |_, n| Cell::tone(n.state.as_str(), node_state_tone(n.state)),
        sort: |_, n| txt(n.state.as_str()),
    },
    Column {
        name: "GPUS",
        priority: 1,
        min: 5,
        max: 7,
        fill: false,
        cell: |_, n| Cell::plain(format!("{}/{}", n.gpus_allocated(), n.gpu_count)),
        sort: |_, n| Key::Num(f64::from(n.gpus_allocated())),
    },
    Column {
        name: "HEALTH",
        priority: 0,
        min: 8,
        max: 8,
        fill: false,
        cell: |c, n| {
            let h = c.base.map_or(GpuHealth::Ok, |b| b.node_severity(&n.name));
            Cell::tone(format!("{h:?}").to_lowercase(), tone_of(h))
        },
        sort: |c, n| {
            let h = c.base.map_or(GpuHealth::Ok, |b| b.node_severity(&n.name));
            Key::Num(-(h as u8 as f64))
        },
    },
    Column {
        name: "LAST XID",
        priority: 1,
        min: 8,
        max: 16,
        fill: false,
        cell: |_, n| match n.last_xid() {
            Some((g, x)) => Cell::tone(
                format!(
                    "{} gpu{g} {}",
                    x.code,
                    x.time.map_or(String::new(), text::clock)
                ),
                Tone::Critical,
            ),
            None => Cell::plain("-"),
        },
        sort: |_, n| num(n.last_xid().map(|(_, x)| x.time.unwrap_or(0) as f64)),
    },
    Column {
        name: "PART",
        priority: 2,
        min: 4,
        max: 12,
        fill: false,
        cell: |_, n| Cell::plain(sanitize(&n.partitions.join(","))),
        sort: |_, n| txt(&n.partitions.join(",")),
    },
    Column {
        name: "SM OCC",
        priority: 3,
        min: 6,
        max: 6,
        fill: false,
        cell: |_, n| Cell::plain(text::percent(n.mean_sm_occupancy())),
        sort: |_, n| num(n.mean_sm_occupancy()),
    },
    Column {
        name: "DBE",
        priority: 2,
        min: 3,
        max: 5,
        fill: false,
        cell: |_, n| match node_dbe(n) {
            Some(d) => Cell::tone(
                d.to_string(),
                if d > 0 { Tone::Critical } else { Tone::Plain },
            ),
            None => Cell::tone("-".to_string(), Tone::Dim),
        },
        sort: |_, n| node_dbe(n).map_or(Key::None, |d| Key::Num(d as f64)),
    },
    Column {
        name: "TEMP",
        priority: 4,
        min: 4,
        max: 5,
        fill: false,
        cell: |_, n| Cell::plain(node_max_temp(n).map_or("-".into(), |t| format!("{t:.0}C"))),
        sort: |_, n| num(node_max_temp(n)),
    },
    Column {
        name: "REASON",
        priority: 1,
        min: 10,
        max: u16::MAX,
        fill: true,
        cell: |_, n| {
            Cell::plain(
                n.reason
                    .as_deref()
                    .map_or("-".into(), |r| sanitize(r).into_owned()),
            )
        },
        sort: |_, n| txt(n.reason.as_deref().unwrap_or("")),
    },
    Column {
        // Its failure domains, narrowest first: `/domain:ib-leaf-2` lists a
        // switch's nodes (enter on a domain's incident opens that). Last:
        // the first ten columns keep their sort digits.
        name: "DOMAIN",
        priority: 3,
        min: 6,
        max: 20,
        fill: false,
        cell: |_, n| Cell::plain(sanitize(&domains_of(n))),
        sort: |_, n| txt(&domains_of(n)),
    },
];
