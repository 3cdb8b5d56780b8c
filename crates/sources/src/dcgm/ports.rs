//! Network (InfiniBand/RoCE) ports from the Prometheus node exporter's
//! infiniband collector: its metric names, scraped directly or read through
//! Prometheus. A port down now, or whose link-downed counter moved, is an
//! event of its node.

use super::merge::{HostMap, node_index};
use super::textformat::Sample;
use crate::model::{Cluster, IbPort, Timestamp};
use std::collections::BTreeMap;

/// The node exporter's families nightshift reads (labels `device`, `port`).
pub const FAMILIES: [&str; 7] = [
    "node_infiniband_state_id",
    "node_infiniband_physical_state_id",
    "node_infiniband_rate_bytes_per_second",
    "node_infiniband_link_downed_total",
    "node_infiniband_link_error_recovery_total",
    "node_infiniband_symbol_error_total",
    "node_infiniband_port_errors_received_total",
];

/// The exporter's own name for its host (`--collector.uname`).
pub const UNAME: &str = "node_uname_info";

/// What one exporter says about one port of its host.
#[derive(Debug, Clone, PartialEq)]
pub struct PortReading {
    /// The host: the exporter's `nodename`, else the endpoint's host.
    pub host: String,
    /// The endpoint it came from (`10.0.0.5:9100`): a `[endpoints] hosts`
    /// key may name it when hosts share an address.
    pub endpoint: String,
    pub port: IbPort,
    pub time: Timestamp,
}

/// The ports in a scrape (or a Prometheus answer, where each series' own
/// `instance` is its endpoint). `endpoint`: the scrape's `host:port`.
pub fn ports_from(samples: &[Sample], endpoint: &str, time: Timestamp) -> Vec<PortReading> {
    // instance → nodename, from node_uname_info.
    // The first of several names for one target (`port_notes` says so).
    let mut names: BTreeMap<&str, &str> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.name == UNAME) {
        if let Some(n) = s.label("nodename") {
            names
                .entry(s.label("instance").unwrap_or(endpoint))
                .or_insert(n);
        }
    }
    let mut by: BTreeMap<(String, String, u32), PortReading> = BTreeMap::new();
    for s in samples
        .iter()
        .filter(|s| FAMILIES.contains(&s.name.as_str()))
    {
        let (Some(device), Some(port)) = (
            s.label("device"),
            s.label("port").and_then(|p| p.parse::<u32>().ok()),
        ) else {
            continue;
        };
        if !s.value.is_finite() || s.value < 0.0 {
            continue;
        }
        let ep = s.label("instance").unwrap_or(endpoint);
        // nightshift's agent names its host; the node exporter does not.
        let host = match s.label("Hostname") {
            Some(h) => h.to_string(),
            None => names
                .get(ep)
                .map_or_else(|| crate::http::host_of(ep), |n| n.to_string()),
        };
        let r = by
            .entry((ep.to_string(), device.to_string(), port))
            .or_insert_with(|| PortReading {
                host,
                endpoint: ep.to_string(),
                port: IbPort {
                    device: device.to_string(),
                    port,
                    ..IbPort::default()
                },
                time,
            });
        if let Some(ms) = s.timestamp_ms {
            r.time = r.time.min(ms / 1000);
        }
        let v = s.value;
        let p = &mut r.port;
        match s.name.as_str() {
            "node_infiniband_state_id" => p.state = Some(v as u32),
            "node_infiniband_physical_state_id" => p.physical_state = Some(v as u32),
            "node_infiniband_rate_bytes_per_second" => p.rate_bytes_per_second = Some(v),
            "node_infiniband_link_downed_total" => p.link_downed = Some(v as u64),
            "node_infiniband_link_error_recovery_total" => p.link_error_recovery = Some(v as u64),
            "node_infiniband_symbol_error_total" => p.symbol_errors = Some(v as u64),
            _ => p.receive_errors = Some(v as u64),
        }
    }
    by.into_values().collect()
}

/// What is odd about a scrape's port series, a line each: two
/// `node_uname_info` for one target naming different hosts (the first is
/// used) — said, not passed over (issue 43).
pub fn port_notes(samples: &[Sample], endpoint: &str) -> Vec<String> {
    let mut names: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.name == UNAME) {
        if let Some(n) = s.label("nodename") {
            let v = names
                .entry(s.label("instance").unwrap_or(endpoint))
                .or_default();
            if !v.contains(&n) {
                v.push(n);
            }
        }
    }
    names
        .into_iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(ep, v)| {
            format!(
                "{} node_uname_info series for {} name different hosts ({}): {} is used",
                v.len(),
                crate::text::sanitize(ep),
                v.iter()
                    .map(|n| crate::text::sanitize(n).into_owned())
                    .collect::<Vec<_>>()
                    .join(", "),
                crate::text::sanitize(v[0])
            )
        })
        .collect()
}

/// Hosts whose ports two endpoints report (two exporters claiming one
/// host, a copied `[endpoints] hosts` line): a line each, naming both —
/// the later reading of a port replaces the earlier one.
pub fn claimed_twice(ports: &[PortReading]) -> Vec<String> {
    let mut by_host: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for r in ports {
        let v = by_host.entry(r.host.as_str()).or_default();
        if !v.contains(&r.endpoint.as_str()) {
            v.push(r.endpoint.as_str());
        }
    }
    by_host
        .into_iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(h, v)| {
            format!(
                "host {} is reported by {} endpoints ({}): its ports are read from each in turn",
                crate::text::sanitize(h),
                v.len(),
                v.iter()
                    .map(|e| crate::text::sanitize(e).into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect()
}

/// The scheduler's node a port reading belongs to: `[endpoints] hosts`
/// by endpoint, then by host, then the node of that (short) name.
pub fn node_of<'a>(
    r: &'a PortReading,
    hosts: &'a HostMap,
    known: &std::collections::HashMap<&str, usize>,
) -> &'a str {
    match hosts.0.get(&r.endpoint) {
        Some(n) => n,
        None => hosts.node_for(&r.host, known),
    }
}

/// Lays the port readings over the snapshot's nodes (a port a node's
/// exporter reports replaces the snapshot's). A host the scheduler does
/// not know becomes a node of its own, marked as known only to an
/// endpoint (as a GPU reading's does); returns how many were.
pub fn merge_ports(c: &mut Cluster, ports: &[PortReading], hosts: &HostMap) -> usize {
    let known = node_index(c);
    let mut by_node: BTreeMap<usize, Vec<&PortReading>> = BTreeMap::new();
    let mut unknown: BTreeMap<String, Vec<&PortReading>> = BTreeMap::new();
    for r in ports {
        let name = node_of(r, hosts, &known);
        match known.get(name) {
            Some(&i) => by_node.entry(i).or_default().push(r),
            None => unknown.entry(name.to_string()).or_default().push(r),
        }
    }
    drop(known);
    let added = unknown.len();
    for (name, rs) in unknown {
        c.nodes
            .push(std::sync::Arc::new(super::merge::endpoint_only_node(
                &name, None,
            )));
        by_node.insert(c.nodes.len() - 1, rs);
    }
    for (i, rs) in by_node {
        let n = std::sync::Arc::make_mut(&mut c.nodes[i]);
        // By (device, port): a node with many ports is merged in linear
        // time, not by a search of its ports for each reading (100k ports
        // took over two minutes).
        let mut ports = n.ib_ports.to_vec();
        let mut at: std::collections::HashMap<(String, u32), usize> = ports
            .iter()
            .enumerate()
            .map(|(k, p)| ((p.device.clone(), p.port), k))
            .collect();
        for r in rs {
            let key = (r.port.device.clone(), r.port.port);
            match at.get(&key) {
                Some(&k) => ports[k] = r.port.clone(),
                None => {
                    at.insert(key, ports.len());
                    ports.push(r.port.clone());
                }
            }
        }
        ports.sort_by(|a, b| a.device.cmp(&b.device).then(a.port.cmp(&b.port)));
        n.ib_ports = ports.into();
    }
    added
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dcgm::textformat::parse;

    /// Hostile and odd series lose nothing but themselves: no port label,
    /// a port that is not a number, a negative or NaN count. The exporter's
    /// nodename names the host; the agent's Hostname label wins over it.
    #[test]
    fn odd_series_are_skipped_and_the_host_is_the_exporters_name() {
        let text = "\
node_uname_info{nodename=\"gpu07\",instance=\"10.0.0.7:9100\"} 1
node_infiniband_state_id{device=\"mlx5_0\",port=\"1\",instance=\"10.0.0.7:9100\"} 4
node_infiniband_link_downed_total{device=\"mlx5_0\",port=\"1\",instance=\"10.0.0.7:9100\"} NaN
node_infiniband_symbol_error_total{device=\"mlx5_0\",port=\"1\",instance=\"10.0.0.7:9100\"} -3
node_infiniband_state_id{device=\"mlx5_1\",instance=\"10.0.0.7:9100\"} 1
node_infiniband_state_id{device=\"mlx5_2\",port=\"one\",instance=\"10.0.0.7:9100\"} 1
node_infiniband_state_id{device=\"mlx5_3\",port=\"1\",Hostname=\"gpu08\"} 1
";
        let (samples, bad) = parse(text);
        assert!(bad.is_empty(), "{bad:?}");
        let ports = ports_from(&samples, "10.0.0.9:9100", 100);
        let names: Vec<(String, String)> = ports
            .iter()
            .map(|p| (p.host.clone(), p.port.name()))
            .collect();
        assert_eq!(
            names,
            [
                ("gpu07".to_string(), "mlx5_0/1".to_string()),
                ("gpu08".to_string(), "mlx5_3/1".to_string())
            ]
        );
        let p0 = &ports[0].port;
        assert_eq!(
            (p0.state, p0.link_downed, p0.symbol_errors),
            (Some(4), None, None)
        );
    }
}

#[cfg(test)]
mod conflict_tests {
    use super::*;
    use crate::dcgm::textformat::parse;

    /// Two `node_uname_info` in one scrape, and one host in two exporters'
    /// scrapes, are said (issue 43).
    #[test]
    fn two_names_for_one_target_and_two_exporters_for_one_host_are_said() {
        let text = "node_uname_info{nodename=\"gpu07\"} 1\nnode_uname_info{nodename=\"gpu08\"} 1\nnode_infiniband_state_id{device=\"mlx5_0\",port=\"1\"} 4\n";
        let (samples, _) = parse(text);
        let notes = port_notes(&samples, "10.0.0.7:9100");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("gpu07, gpu08"), "{notes:?}");
        let a = ports_from(&samples, "10.0.0.7:9100", 1);
        let (one, _) = parse(
            "node_uname_info{nodename=\"gpu07\"} 1\nnode_infiniband_state_id{device=\"mlx5_0\",port=\"1\"} 4\n",
        );
        let b = ports_from(&one, "10.0.0.9:9100", 1);
        let all: Vec<PortReading> = a.into_iter().chain(b).collect();
        let twice = claimed_twice(&all);
        assert_eq!(twice.len(), 1, "{twice:?}");
        assert!(
            twice[0].contains("10.0.0.7:9100, 10.0.0.9:9100"),
            "{twice:?}"
        );
        assert!(claimed_twice(&all[..1]).is_empty());
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use crate::dcgm::textformat::parse;
    use proptest::prelude::*;

    /// A node exporter's lines with hostile labels and values.
    fn arb_line() -> impl Strategy<Value = String> {
        let family = prop_oneof![
            Just("node_infiniband_state_id"),
            Just("node_infiniband_physical_state_id"),
            Just("node_infiniband_link_downed_total"),
            Just("node_infiniband_rate_bytes_per_second"),
            Just("node_uname_info"),
            Just("node_infiniband_port_data_received_bytes_total"),
        ];
        let value = prop_oneof![
            Just("NaN".to_string()),
            Just("+Inf".to_string()),
            Just("-1".to_string()),
            Just("1e308".to_string()),
            Just("18446744073709551616".to_string()),
            any::<u32>().prop_map(|n| n.to_string()),
        ];
        (
            family,
            "\\PC{0,12}",
            "[0-9a-z-]{0,6}",
            "\\PC{0,12}",
            "\\PC{0,10}",
            value,
        )
            .prop_map(|(f, device, port, nodename, instance, v)| {
                let esc = |s: &str| {
                    s.replace('\\', "\\\\")
                        .replace('"', "\\\"")
                        .replace('\n', "\\n")
                };
                format!(
                    "{f}{{device=\"{}\",port=\"{}\",nodename=\"{}\",instance=\"{}\"}} {v}\n",
                    esc(&device),
                    esc(&port),
                    esc(&nodename),
                    esc(&instance)
                )
            })
    }

    proptest! {
        /// The node exporter's port series, hostile or arbitrary: parsed,
        /// read as ports, merged onto a cluster and watched for events (by
        /// the engine's deriver) without a panic; every port kept is one the series named.
        #[test]
        fn fuzz_node_exporter_ports(lines in prop::collection::vec(arb_line(), 0..24), junk in "\\PC{0,80}") {
            let text = format!("{}{junk}\n", lines.concat());
            let (samples, _) = parse(&text);
            let ports = ports_from(&samples, "10.0.0.9:9100", 100);
            for p in &ports {
                prop_assert!(samples.iter().any(|s| s.label("device") == Some(p.port.device.as_str())));
            }
            let mut c = crate::model::Cluster::default();
            let hosts = HostMap::default();
            merge_ports(&mut c, &ports, &hosts);
            let site = crate::engine::SiteParams::default();
            let mut m = crate::engine::memory::Memory::default();
            m.observe(&c, &site);
            m.observe(&c, &site);
        }
    }
}
