//! The switches' tree from `scontrol show topology` (the topology/tree
//! plugin; no REST version serves it): which leaf and spine each node is
//! under, as failure domains. Read at start and every few minutes.

use super::SlurmConfig;
use super::hostlist;
use crate::model::{Cluster, Domain};
use std::collections::BTreeMap;
use std::time::Duration;

/// How often the topology is read again.
pub const REFRESH: Duration = Duration::from_secs(600);

/// One line of `scontrol show topology`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    pub name: String,
    /// 0: a leaf, its nodes attached; higher: switches of switches.
    pub level: u32,
    /// Every node under it (Slurm lists them for every level).
    pub nodes: Vec<String>,
}

/// The switches `scontrol show topology` prints, one per line
/// (`SwitchName=leaf-a Level=0 LinkSpeed=1 Nodes=gpu[01-02]`). No
/// topology plugin: no lines, none.
pub fn parse(text: &str) -> Vec<Switch> {
    text.lines()
        .filter_map(|line| {
            let mut name = None;
            let mut level = 0;
            let mut nodes = Vec::new();
            for field in line.split_whitespace() {
                match field.split_once('=') {
                    Some(("SwitchName", v)) => name = Some(v.to_string()),
                    Some(("Level", v)) => level = v.parse().unwrap_or(0),
                    Some(("Nodes", v)) => nodes = hostlist::expand(v).unwrap_or_default(),
                    _ => {}
                }
            }
            Some(Switch {
                name: name?,
                level,
                nodes,
            })
        })
        .collect()
}

/// The level word for a switch level: `leaf`, `spine`, `core`.
pub fn level_word(level: u32) -> &'static str {
    match level {
        0 => "leaf",
        1 => "spine",
        _ => "core",
    }
}

/// Each node's switches, lowest level first, as failure domains.
pub fn domains(switches: &[Switch]) -> BTreeMap<String, Vec<Domain>> {
    let mut sorted: Vec<&Switch> = switches.iter().collect();
    sorted.sort_by(|a, b| a.level.cmp(&b.level).then(a.name.cmp(&b.name)));
    let mut out: BTreeMap<String, Vec<Domain>> = BTreeMap::new();
    for s in sorted {
        for n in &s.nodes {
            out.entry(n.clone())
                .or_default()
                .push(Domain::new(level_word(s.level), &s.name));
        }
    }
    out
}

/// Gives each node its switches (ahead of any domain it had).
pub fn apply(c: &mut Cluster, by_node: &BTreeMap<String, Vec<Domain>>) {
    if by_node.is_empty() {
        return;
    }
    for n in c.nodes.iter_mut() {
        if let Some(ds) = by_node.get(&n.name) {
            let n = std::sync::Arc::make_mut(n);
            let mut all = ds.clone();
            all.extend(n.domains.iter().filter(|d| !ds.contains(d)).cloned());
            n.domains = all.into();
        }
    }
}

/// Runs `scontrol show topology` as the actions' scontrol is run (its
/// path, SLURM_CONF, timeout).
pub async fn fetch(cfg: &SlurmConfig) -> Result<Vec<Switch>, String> {
    let mut cmd = tokio::process::Command::new(&cfg.scontrol);
    cmd.args(["show", "topology"]).kill_on_drop(true);
    if let Some(conf) = &cfg.slurm_conf {
        cmd.env("SLURM_CONF", conf);
    }
    let out = tokio::time::timeout(cfg.timeout, cmd.output())
        .await
        .map_err(|_| format!("{} show topology: timed out", cfg.scontrol))?
        .map_err(|e| format!("cannot run {}: {e}", cfg.scontrol))?;
    if !out.status.success() {
        return Err(format!(
            "{} show topology: {}",
            cfg.scontrol,
            crate::text::one_line(String::from_utf8_lossy(&out.stderr).trim(), 200)
        ));
    }
    Ok(parse(&String::from_utf8_lossy(&out.stdout)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Slurm 22.05 and 24.11 print for the labs' topology.conf.
    const LAB: &str = "SwitchName=leaf-a Level=0 LinkSpeed=1 Nodes=gpu[01-02]\n\
        SwitchName=leaf-b Level=0 LinkSpeed=1 Nodes=gpu[03-04]\n\
        SwitchName=spine-0 Level=1 LinkSpeed=1 Nodes=gpu[01-04] Switches=leaf-a,leaf-b\n";

    #[test]
    fn each_node_gets_its_leaf_then_its_spine() {
        let d = domains(&parse(LAB));
        assert_eq!(
            d["gpu03"],
            [
                Domain::new("leaf", "leaf-b"),
                Domain::new("spine", "spine-0")
            ]
        );
        assert_eq!(d.len(), 4);
        assert!(parse("No topology information available\n").is_empty());
        assert!(parse("").is_empty());
    }
}
