//! The API calls actions make, built exactly as sent and shown.

use serde_json::{Value, json};

/// One API call, as the preview shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub method: &'static str,
    pub path: String,
    pub body: Option<Value>,
}

impl std::fmt::Display for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.body {
            Some(b) => write!(f, "{} {} {b}", self.method, self.path),
            None => write!(f, "{} {}", self.method, self.path),
        }
    }
}

pub use crate::kube::fields::REASON;
pub(crate) const KUEUE: &str = "/apis/kueue.x-k8s.io/v1beta1";

pub(crate) fn node_path(node: &str) -> String {
    format!("/api/v1/nodes/{node}")
}

pub fn cordon_call(node: &str, reason: &str) -> Call {
    Call {
        method: "PATCH",
        path: node_path(node),
        body: Some(json!({"metadata": {"annotations": {REASON: reason}},
            "spec": {"unschedulable": true}})),
    }
}

pub fn uncordon_call(node: &str) -> Call {
    Call {
        method: "PATCH",
        path: node_path(node),
        body: Some(json!({"metadata": {"annotations": {REASON: null}},
            "spec": {"unschedulable": null}})),
    }
}

pub fn reason_call(node: &str, reason: &str) -> Call {
    Call {
        method: "PATCH",
        path: node_path(node),
        body: Some(json!({"metadata": {"annotations": {REASON: reason}}})),
    }
}

pub fn evict_call(ns: &str, pod: &str) -> Call {
    Call {
        method: "POST",
        path: format!("/api/v1/namespaces/{ns}/pods/{pod}/eviction"),
        body: Some(json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": pod, "namespace": ns}})),
    }
}

pub(crate) fn workload_call(ns: &str, wl: &str, spec: Value) -> Call {
    Call {
        method: "PATCH",
        path: format!("{KUEUE}/namespaces/{ns}/workloads/{wl}"),
        body: Some(json!({ "spec": spec })),
    }
}
