//! Discovery: the API groups the lab serves and each group version's
//! resources, as an API server lists them (`/apis`, `/api/v1`,
//! `/apis/GROUP/VERSION`) for kubectl and kube-rs to find their way.

use super::response::{Body, fail, reply};
use super::store::{Failure, Store};
use serde_json::{Value, json};
use std::sync::Mutex;

/// Kueue's visibility API group (an aggregated API on a real cluster).
pub(crate) const VISIBILITY: &str = "visibility.kueue.x-k8s.io";
pub(crate) const AUTHORIZATION: &str = "authorization.k8s.io";

pub(crate) fn kueue_served(store: &Mutex<Store>) -> bool {
    store.lock().is_ok_and(|s| {
        s.resource("kueue.x-k8s.io", "v1beta1", "workloads")
            .is_some()
    })
}

pub(crate) fn groups(store: &Mutex<Store>) -> Value {
    let Ok(s) = store.lock() else {
        return json!({});
    };
    let mut names: Vec<&str> = Vec::new();
    for r in &s.resources {
        if !r.group.is_empty() && !names.contains(&r.group.as_str()) {
            names.push(&r.group);
        }
    }
    let groups: Vec<Value> = names
        .iter()
        .map(|g| {
            let versions: Vec<Value> = s
                .resources
                .iter()
                .filter(|r| r.group == *g)
                .map(|r| r.version.as_str())
                .fold(Vec::new(), |mut acc: Vec<&str>, v| {
                    if !acc.contains(&v) {
                        acc.push(v);
                    }
                    acc
                })
                .into_iter()
                .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
                .collect();
            json!({"name": g, "versions": versions, "preferredVersion": versions[0]})
        })
        .collect();
    let mut groups = groups;
    if s.resource("kueue.x-k8s.io", "v1beta1", "workloads")
        .is_some()
    {
        let v = json!({"groupVersion": format!("{VISIBILITY}/v1beta1"), "version": "v1beta1"});
        groups.push(json!({"name": VISIBILITY, "versions": [v], "preferredVersion": v}));
    }
    let v = json!({"groupVersion": format!("{AUTHORIZATION}/v1"), "version": "v1"});
    groups.push(json!({"name": AUTHORIZATION, "versions": [v], "preferredVersion": v}));
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub(crate) fn resource_list(
    store: &Mutex<Store>,
    group: &str,
    version: &str,
) -> hyper::Response<Body> {
    let Ok(s) = store.lock() else {
        return fail(Failure::new(500, "InternalError", "store poisoned"));
    };
    let mut resources: Vec<Value> = Vec::new();
    for r in s
        .resources
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let mut verbs = vec!["get", "list", "watch", "patch", "delete"];
        if r.kind == "Event" || r.kind.ends_with("Definition") {
            verbs.push("create");
        }
        resources.push(json!({"name": r.plural, "singularName": r.singular,
            "namespaced": r.namespaced, "kind": r.kind, "verbs": verbs,
            "shortNames": r.short_names}));
        if r.kind == "Pod" {
            resources.push(json!({"name": "pods/eviction", "singularName": "",
                "namespaced": true, "group": "policy", "version": "v1",
                "kind": "Eviction", "verbs": ["create"]}));
        }
    }
    if resources.is_empty() {
        return fail(Failure::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    reply(
        200,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
            "resources": resources}),
    )
}
