//! A pod as nightshift keeps it (issue 28): a typed record of the fields
//! the map reads, not the pod's JSON. A pod is most of what a big cluster
//! holds (eight of them a node), and even slimmed, as a
//! `serde_json::Value` it was ~80 nodes and a dozen small maps — ~9 KB a
//! pod, 360 MB for 40,000. This record is a few hundred bytes.
//!
//! Read leniently, as the map read the JSON: a field of the wrong type is
//! absent, never an error; the GPU counts keep their raw values so that
//! the map can still say which one it cannot believe.
//!
//! A field the map starts reading must be added here: the map's tests feed
//! it pods through `Objects::from_values`, which builds these records.

use serde_json::Value;

/// `key → value` pairs (labels, annotations, a node selector), sorted by key.
pub type Pairs = Box<[(Box<str>, Box<str>)]>;

fn text(v: &Value) -> Option<Box<str>> {
    v.as_str().map(Box::from)
}

/// The string entries of a JSON object whose keys `wanted` takes, sorted
/// (others are dropped).
fn pairs_of(v: &Value, wanted: impl Fn(&str) -> bool) -> Pairs {
    let mut out: Vec<(Box<str>, Box<str>)> = v
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| wanted(k))
        .filter_map(|(k, v)| Some((Box::from(k.as_str()), text(v)?)))
        .collect();
    out.sort();
    out.into_boxed_slice()
}

fn pairs(v: &Value) -> Pairs {
    pairs_of(v, |_| true)
}

/// The annotations the map reads: nightshift's own (checkpoint, user) and
/// the gang schedulers' (Volcano's group). Others can be large — kubectl's
/// last-applied copy of the whole pod is most of a pod's size.
fn read_annotation(k: &str) -> bool {
    ["nightshift.io/", "scheduling.k8s.io/", "kueue.x-k8s.io/"]
        .iter()
        .any(|p| k.starts_with(p))
}

fn lookup<'a>(p: &'a Pairs, k: &str) -> Option<&'a str> {
    p.binary_search_by(|(key, _)| (**key).cmp(k))
        .ok()
        .map(|i| &*p[i].1)
}

/// The controller-or-not owner of a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Owner {
    pub kind: Option<Box<str>>,
    pub name: Option<Box<str>>,
    pub controller: bool,
}

/// A container's NVIDIA resources (`nvidia.com/…` keys only), raw: the map
/// checks each count.
#[derive(Debug, Clone, PartialEq)]
pub struct Container {
    pub name: Option<Box<str>>,
    pub limits: Box<[(Box<str>, Value)]>,
    pub requests: Box<[(Box<str>, Value)]>,
}

fn nvidia(v: &Value) -> Box<[(Box<str>, Value)]> {
    v.as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("nvidia.com/"))
        .map(|(k, v)| (Box::from(k.as_str()), v.clone()))
        .collect()
}

impl Container {
    /// A container of a pod or of a pod template's JSON.
    pub fn from_value(c: &Value) -> Container {
        Container {
            name: text(&c["name"]),
            limits: nvidia(&c["resources"]["limits"]),
            requests: nvidia(&c["resources"]["requests"]),
        }
    }
}

/// What the map reads of a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Pod {
    pub name: Box<str>,
    pub namespace: Option<Box<str>>,
    /// `metadata.creationTimestamp`, epoch seconds.
    pub created: Option<i64>,
    pub labels: Pairs,
    /// Those the map reads (`read_annotation`).
    pub annotations: Pairs,
    pub owners: Box<[Owner]>,
    pub node_name: Option<Box<str>>,
    pub node_selector: Pairs,
    pub containers: Box<[Container]>,
    pub priority: Option<i64>,
    pub active_deadline_s: Option<u64>,
    pub phase: Option<Box<str>>,
    /// `status.startTime`, epoch seconds.
    pub start_time: Option<i64>,
    /// The containers' restarts, in all.
    pub restarts: u32,
}

impl Pod {
    /// The pod of a pod's JSON, as the API server sends it.
    pub fn from_value(v: &Value) -> Pod {
        let m = &v["metadata"];
        let spec = &v["spec"];
        let status = &v["status"];
        Pod {
            name: text(&m["name"]).unwrap_or_default(),
            namespace: text(&m["namespace"]),
            created: super::fields::time(&m["creationTimestamp"]),
            labels: pairs(&m["labels"]),
            annotations: pairs_of(&m["annotations"], read_annotation),
            owners: m["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|o| Owner {
                    kind: text(&o["kind"]),
                    name: text(&o["name"]),
                    controller: o["controller"] == true,
                })
                .collect(),
            node_name: text(&spec["nodeName"]),
            node_selector: pairs(&spec["nodeSelector"]),
            containers: spec["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(Container::from_value)
                .collect(),
            priority: spec["priority"].as_i64(),
            active_deadline_s: spec["activeDeadlineSeconds"].as_u64(),
            phase: text(&status["phase"]),
            start_time: super::fields::time(&status["startTime"]),
            restarts: status["containerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["restartCount"].as_u64())
                .map(|n| n as u32)
                .fold(0, u32::saturating_add),
        }
    }

    /// `ns/name`, as [`super::map::key`] names objects.
    pub fn key(&self) -> String {
        match self.namespace.as_deref() {
            Some(ns) if !ns.is_empty() => format!("{ns}/{}", self.name),
            _ => self.name.to_string(),
        }
    }

    pub fn label(&self, k: &str) -> Option<&str> {
        lookup(&self.labels, k)
    }

    pub fn annotation(&self, k: &str) -> Option<&str> {
        lookup(&self.annotations, k)
    }

    /// The value `spec.nodeSelector` asks of label `k`.
    pub fn selector(&self, k: &str) -> Option<&str> {
        lookup(&self.node_selector, k)
    }

    pub fn is(&self, phase: &str) -> bool {
        self.phase.as_deref() == Some(phase)
    }
}

/// An object whose labels and annotations the map reads: a pod, or any
/// other object's JSON (a Kueue Workload).
pub trait Meta {
    fn label(&self, k: &str) -> Option<&str>;
    fn annotation(&self, k: &str) -> Option<&str>;
}

impl Meta for Pod {
    fn label(&self, k: &str) -> Option<&str> {
        Pod::label(self, k)
    }
    fn annotation(&self, k: &str) -> Option<&str> {
        Pod::annotation(self, k)
    }
}

impl Meta for Value {
    fn label(&self, k: &str) -> Option<&str> {
        self["metadata"]["labels"][k].as_str()
    }
    fn annotation(&self, k: &str) -> Option<&str> {
        self["metadata"]["annotations"][k].as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_keeps_what_the_map_reads_leniently() {
        let p = Pod::from_value(&json!({
            "metadata": {"name": "w-0", "namespace": "ml", "creationTimestamp": "2026-11-20T10:00:00Z",
                "labels": {"b": "2", "a": "1", "n": 3},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{…}",
                    "nightshift.io/checkpoint-last": "1795168800"},
                "ownerReferences": [{"kind": "Job", "name": "w", "controller": true}, {"kind": "X"}],
                "managedFields": [{"manager": "kubectl"}]},
            "spec": {"nodeName": "gpu01", "priority": "high", "activeDeadlineSeconds": 60,
                "nodeSelector": {"nvidia.com/gpu.product": "H100"},
                "containers": [{"name": "main", "image": "nvcr.io/x",
                    "resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "4"}, "requests": {"memory": "1Gi"}}}]},
            "status": {"phase": "Running", "startTime": "2026-11-20T10:01:00Z",
                "containerStatuses": [{"restartCount": 2}, {"restartCount": 1}, {"restartCount": "x"}]}
        }));
        assert_eq!(p.key(), "ml/w-0");
        assert_eq!(p.created, Some(1_795_168_800));
        assert_eq!(p.start_time, Some(1_795_168_860));
        // Sorted, the number dropped; found by binary search.
        assert_eq!(
            &*p.labels,
            &[("a".into(), "1".into()), ("b".into(), "2".into())]
        );
        assert_eq!(p.label("b"), Some("2"));
        assert_eq!(p.label("n"), None);
        // Only the annotations the map reads.
        assert_eq!(p.annotations.len(), 1);
        assert_eq!(
            p.annotation("nightshift.io/checkpoint-last"),
            Some("1795168800")
        );
        assert_eq!(p.owners.len(), 2);
        assert!(p.owners[0].controller && !p.owners[1].controller);
        assert_eq!(p.node_name.as_deref(), Some("gpu01"));
        assert_eq!(p.selector("nvidia.com/gpu.product"), Some("H100"));
        // A priority that is no number is none, as the JSON read gave it.
        assert_eq!(p.priority, None);
        assert_eq!(p.active_deadline_s, Some(60));
        assert!(p.is("Running"));
        assert_eq!(p.restarts, 3);
        // Only NVIDIA's resources are kept, raw.
        assert_eq!(
            &*p.containers[0].limits,
            &[("nvidia.com/gpu".into(), json!("8"))]
        );
        assert!(p.containers[0].requests.is_empty());
        // A cluster-scoped or nameless pod's key, and a pod of nothing.
        assert_eq!(
            Pod::from_value(&json!({"metadata": {"name": "x"}})).key(),
            "x"
        );
        assert_eq!(Pod::from_value(&json!(null)).key(), "");
    }
}
