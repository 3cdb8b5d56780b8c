//! What nightshift keeps of a watched object other than a pod (issue 28;
//! pods are typed records, see `pod`): the fields the map reads, not the
//! whole object. A node carries the list of every image it has pulled;
//! every object its managed-fields history. Nodes keep a listed set of
//! fields; every kind loses `metadata.managedFields` and kubectl's
//! last-applied copy of itself.
//!
//! A field the map starts reading must be added here: the map's tests run
//! on slimmed objects (`Objects::from_values` slims), so a field left out
//! fails them.

use serde_json::Value;

/// Keeps of `v` only `keys` (a missing key stays missing).
fn keep(v: &mut Value, keys: &[&str]) {
    if let Value::Object(m) = v {
        m.retain(|k, _| keys.contains(&k.as_str()));
    }
}

/// The object's metadata without its write history.
fn slim_metadata(v: &mut Value) {
    let Some(Value::Object(m)) = v.get_mut("metadata") else {
        return;
    };
    m.remove("managedFields");
    if let Some(Value::Object(a)) = m.get_mut("annotations") {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

fn slim_node(v: &mut Value) {
    if let Some(spec) = v.get_mut("spec") {
        keep(spec, &["unschedulable", "taints", "providerID"]);
    }
    if let Some(status) = v.get_mut("status") {
        keep(
            status,
            &["capacity", "allocatable", "conditions", "nodeInfo"],
        );
        if let Some(info) = status.get_mut("nodeInfo") {
            keep(info, &["bootID", "kubeletVersion", "machineID"]);
        }
    }
}

/// `v` (an object of the watched `kind`, a `KINDS` entry) with only what
/// nightshift reads.
pub fn slim(kind: &str, v: &mut Value) {
    slim_metadata(v);
    if kind == "nodes" {
        slim_node(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_lose_their_history_and_nodes_their_images() {
        // Most kinds lose only the metadata's history.
        let mut w =
            json!({"metadata": {"name": "w", "managedFields": []}, "spec": {"podSets": []}});
        slim("workloads", &mut w);
        assert_eq!(
            w,
            json!({"metadata": {"name": "w"}, "spec": {"podSets": []}})
        );
        let mut n = json!({"metadata": {"name": "gpu01"}, "spec": {"podCIDR": "10.0.0.0/24", "taints": []},
            "status": {"images": [{"names": ["x"]}], "allocatable": {"nvidia.com/gpu": "8"},
                "nodeInfo": {"bootID": "b", "osImage": "Debian"}}});
        slim("nodes", &mut n);
        assert_eq!(
            n,
            json!({"metadata": {"name": "gpu01"}, "spec": {"taints": []},
                "status": {"allocatable": {"nvidia.com/gpu": "8"}, "nodeInfo": {"bootID": "b"}}})
        );
    }
}
