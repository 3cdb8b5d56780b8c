//! The resources the lab serves: the built-in ones, and those its
//! CustomResourceDefinitions add.

use serde_json::Value;

/// One kind of object the server serves, as discovery lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// `""` for the core group.
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
}

impl Resource {
    fn new(group: &str, version: &str, plural: &str, kind: &str, namespaced: bool) -> Self {
        Resource {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            kind: kind.into(),
            namespaced,
            short_names: Vec::new(),
        }
    }

    fn short(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|s| s.to_string()).collect();
        self
    }

    /// `v1`, `apps/v1`.
    pub fn group_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// What the lab serves without any CRD: the built-in resources nightshift
/// and `kubectl get/cordon/drain` use.
pub fn builtin_resources() -> Vec<Resource> {
    vec![
        Resource::new("", "v1", "namespaces", "Namespace", false).short(&["ns"]),
        Resource::new("", "v1", "nodes", "Node", false).short(&["no"]),
        Resource::new("", "v1", "pods", "Pod", true).short(&["po"]),
        Resource::new("", "v1", "events", "Event", true).short(&["ev"]),
        Resource::new("apps", "v1", "daemonsets", "DaemonSet", true).short(&["ds"]),
        Resource::new("apps", "v1", "deployments", "Deployment", true).short(&["deploy"]),
        Resource::new("apps", "v1", "replicasets", "ReplicaSet", true).short(&["rs"]),
        Resource::new("apps", "v1", "statefulsets", "StatefulSet", true).short(&["sts"]),
        Resource::new("batch", "v1", "jobs", "Job", true),
        Resource::new(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            true,
        )
        .short(&["pdb"]),
        Resource::new(
            "scheduling.k8s.io",
            "v1",
            "priorityclasses",
            "PriorityClass",
            false,
        )
        .short(&["pc"]),
        Resource::new(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
        )
        .short(&["crd", "crds"]),
    ]
}

/// The served resources a CustomResourceDefinition adds (one per served
/// version), as a real API server does once the CRD is established.
pub fn crd_resources(crd: &Value) -> Vec<Resource> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let names = &spec["names"];
    let (Some(plural), Some(kind)) = (names["plural"].as_str(), names["kind"].as_str()) else {
        return Vec::new();
    };
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    let short: Vec<&str> = names["shortNames"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"].as_bool() != Some(false))
        .filter_map(|v| v["name"].as_str())
        .map(|version| {
            let mut r = Resource::new(group, version, plural, kind, namespaced).short(&short);
            if let Some(s) = names["singular"].as_str() {
                r.singular = s.into();
            }
            r
        })
        .collect()
}
