//! What nightshift keeps of a watched object (issue 28): the fields the map
//! reads, not the whole object. A pod as the API server sends it carries
//! its managed-fields history, every container's image, command, env,
//! probes and mounts, and its volumes; a node carries the list of every
//! image it has pulled. At 40,000 pods that was most of the console's
//! memory. Pods and nodes keep a listed set of fields; every kind loses
//! `metadata.managedFields` and kubectl's last-applied copy of itself.
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

/// `keep` on every element of the array at `v[field]`.
fn keep_each(v: &mut Value, field: &str, keys: &[&str]) {
    if let Some(Value::Array(items)) = v.get_mut(field) {
        for i in items {
            keep(i, keys);
        }
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

/// What the map reads of a pod's containers and their statuses.
const CONTAINER: &[&str] = &["name", "resources"];
const CONTAINER_STATUS: &[&str] = &["name", "restartCount"];

/// A pod is most of what a big cluster holds (eight of them a node): it
/// keeps only what the map reads — not its conditions (the scheduler's
/// reasons come from its events), tolerations, scheduler or init
/// containers.
fn slim_pod(v: &mut Value) {
    if let Some(spec) = v.get_mut("spec") {
        keep(
            spec,
            &[
                "nodeName",
                "nodeSelector",
                "containers",
                "priority",
                "activeDeadlineSeconds",
            ],
        );
        keep_each(spec, "containers", CONTAINER);
    }
    if let Some(status) = v.get_mut("status") {
        keep(
            status,
            &[
                "phase",
                "containerStatuses",
                "startTime",
                "reason",
                "message",
            ],
        );
        keep_each(status, "containerStatuses", CONTAINER_STATUS);
    }
    if let Some(Value::Array(owners)) = v.pointer_mut("/metadata/ownerReferences") {
        for o in owners {
            keep(o, &["apiVersion", "kind", "name", "uid", "controller"]);
        }
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
    match kind {
        "pods" => slim_pod(v),
        "nodes" => slim_node(v),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_keeps_what_the_map_reads_and_loses_the_rest() {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "w-0", "namespace": "ml", "labels": {"a": "b"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{…}", "keep": "me"},
                "ownerReferences": [{"kind": "Job", "name": "w", "controller": true, "blockOwnerDeletion": true}],
                "managedFields": [{"manager": "kubectl"}]},
            "spec": {"nodeName": "gpu01", "volumes": [{"name": "data"}],
                "containers": [{"name": "main", "image": "nvcr.io/x", "env": [{"name": "A"}],
                    "resources": {"limits": {"nvidia.com/gpu": "8"}}}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "main", "restartCount": 2, "ready": true, "image": "nvcr.io/x", "imageID": "sha"}]}
        });
        slim("pods", &mut pod);
        assert_eq!(
            pod,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "w-0", "namespace": "ml", "labels": {"a": "b"},
                    "annotations": {"keep": "me"},
                    "ownerReferences": [{"kind": "Job", "name": "w", "controller": true}]},
                "spec": {"nodeName": "gpu01",
                    "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]},
                "status": {"phase": "Running",
                    "containerStatuses": [{"name": "main", "restartCount": 2}]}
            })
        );
        // Other kinds lose only the metadata's history.
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
