//! `[topology]` in the config: failure domains the scheduler does not say
//! (a rack, a power feed, an NVLink domain), laid over every snapshot of
//! any source, after the source's own domains (where the snapshot is
//! finished: `assemble`).

use crate::model::{Cluster, Domain};
use std::sync::Arc;

/// Each configured domain with its nodes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SiteDomains(pub Vec<(Domain, Vec<String>)>);

impl SiteDomains {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each node's configured domains, by node: one look-up a node, not a
    /// search of every domain's list.
    fn by_node(&self) -> std::collections::HashMap<&str, Vec<&Domain>> {
        let mut out: std::collections::HashMap<&str, Vec<&Domain>> = Default::default();
        for (d, nodes) in &self.0 {
            for n in nodes {
                out.entry(n.as_str()).or_default().push(d);
            }
        }
        out
    }

    /// Gives each named node its configured domains (a domain the source
    /// already gave it is not repeated). Returns the configured nodes the
    /// snapshot does not have, sorted (a typo in `[topology]`).
    pub fn apply(&self, c: &mut Cluster) -> Vec<String> {
        if self.0.is_empty() {
            return Vec::new();
        }
        let mut by_node = self.by_node();
        for n in c.nodes.iter_mut() {
            let Some(ds) = by_node.remove(n.name.as_str()) else {
                continue;
            };
            let extra: Vec<Domain> = ds
                .into_iter()
                .filter(|d| !n.domains.contains(d))
                .cloned()
                .collect();
            if !extra.is_empty() {
                let n = Arc::make_mut(n);
                n.domains = n.domains.iter().cloned().chain(extra).collect();
            }
        }
        let mut unknown: Vec<String> = by_node.into_keys().map(str::to_string).collect();
        unknown.sort();
        unknown
    }
}

/// What to say of the configured nodes a snapshot does not have (`apply`'s
/// answer): a typo in `[topology]`, never passed over. `None`: none.
pub fn unknown_note(unknown: &[String]) -> Option<String> {
    if unknown.is_empty() {
        return None;
    }
    let shown: Vec<&str> = unknown.iter().take(5).map(String::as_str).collect();
    Some(format!(
        "[topology] names {} node(s) this cluster does not have: {}{}",
        unknown.len(),
        shown.join(", "),
        if unknown.len() > 5 { ", …" } else { "" }
    ))
}
