//! kube-lab: a Kubernetes API server for tests, serving objects loaded from
//! a directory of manifests.
//!
//! No real kube-apiserver can run on the machines nightshift is built on
//! (none is packaged, none builds offline, kind needs containers), so the
//! Kubernetes source is tested against this stand-in, and the stand-in is
//! checked with the real client: the tests run Debian's/the image's
//! `kubectl get`, `cordon`, `uncordon` and `drain` against it.
//!
//! What it speaks, as kube-apiserver does:
//! - discovery: `/api`, `/apis`, `/api/v1`, `/apis/GROUP/VERSION` (legacy,
//!   not aggregated, discovery: clients fall back to it), `/version`;
//!   custom resources are served exactly when a `CustomResourceDefinition`
//!   for them is among the manifests;
//! - list (with `labelSelector`, `fieldSelector`, and pages: `limit` and
//!   `continue`, as kubectl and kube's watcher ask), get, merge and strategic-merge PATCH (maps and scalars:
//!   the fields nightshift and kubectl patch), DELETE, create (POST to a
//!   collection: 409 when the name is taken; no controller runs what is
//!   created — a test plays the Job controller and the kubelet with
//!   kubectl where it needs them);
//! - watch: `watch=true` from a `resourceVersion` (the changes since), or
//!   from none (every object as ADDED), bookmarks when asked, `timeoutSeconds`,
//!   and 410 Gone (an ERROR event) from a version older than the kept
//!   history;
//! - the pods/eviction subresource, refused with 429 while a
//!   PodDisruptionBudget that selects a running pod allows no disruption
//!   (the budget's status is recomputed from the pods, as the disruption
//!   controller does); an allowed eviction deletes the pod at once.
//!
//! - Kueue's reaction to `spec.active` on a Workload, emulated: deactivated
//!   → `Evicted` (InactiveWorkload), admission and quota released, the
//!   owner's pods deleted; reactivated → pending for quota again.
//!
//! - Kueue's visibility API (`visibility.kueue.x-k8s.io/v1beta1`
//!   `clusterqueues/NAME/pendingworkloads`), served with Kueue's CRDs:
//!   pending workloads by priority, then age.
//!
//! Test switches under `/lab/`: `POST /lab/compact` (forget history: the
//! next resume gets 410), `POST /lab/cut-watches` (drop every watch
//! connection), `POST /lab/down?seconds=N` (answer 503 for N seconds),
//! `POST /lab/apply` (create or replace one object, JSON).
//!
//! - two users (see `rbac`): no credentials is `lab-admin`, who may do
//!   anything; `lab-viewer` (impersonated, or by its token) may only get,
//!   list and watch, and is answered 403 Forbidden otherwise;
//!   `SelfSubjectAccessReview` says which.
//!
//! Not served: other authentication, RBAC objects, Table output,
//! JSON patch and server-side apply (415), creation other than through
//! `/lab/apply`, aggregated discovery; a `continue` token never expires.

mod discovery;
mod http;
mod query;
mod rbac;
mod resources;
mod response;
mod store;

pub use http::{Lab, Write, serve};
pub use rbac::VIEWER_TOKEN;
pub use store::{Resource, Store, merge, selects};

use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// Why the lab cannot start: one line naming the file, the object or the
/// address.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("{}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// A file that is not YAML or JSON objects.
    #[error("{}: {why}", path.display())]
    Parse {
        path: std::path::PathBuf,
        why: String,
    },
    /// An object the lab refuses, as `kubectl apply` would.
    #[error("{what}: {why}")]
    Object { what: String, why: String },
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
}

/// Every object in the directory's `.yaml`, `.yml` and `.json` files, in
/// file-name order: one object, several YAML documents, or a `List` per
/// file (what `kubectl get -o yaml` prints).
pub fn load_dir(dir: &Path) -> Result<Vec<Value>, LabError> {
    let read = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LabError::Read { path, source }
    };
    let parse = |path: &Path| {
        let path = path.to_path_buf();
        move |e: &dyn std::fmt::Display| LabError::Parse {
            path,
            why: e.to_string(),
        }
    };
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(read(dir))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            )
        })
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(read(&f))?;
        let docs: Vec<Value> = if f.extension().and_then(|e| e.to_str()) == Some("json") {
            vec![serde_json::from_str(&text).map_err(|e| parse(&f)(&e))?]
        } else {
            serde_saphyr::from_multiple(&text).map_err(|e| parse(&f)(&e))?
        };
        for d in docs {
            if d.is_null() {
                continue;
            }
            if d["kind"] == "List"
                || d["items"].is_array() && d["kind"].as_str().is_some_and(|k| k.ends_with("List"))
            {
                out.extend(d["items"].as_array().cloned().unwrap_or_default());
            } else {
                out.push(d);
            }
        }
    }
    // CRDs first, so that a directory's order never matters.
    out.sort_by_key(|o| o["kind"] != "CustomResourceDefinition");
    Ok(out)
}

/// A kubeconfig for a lab at `server` (`http://127.0.0.1:PORT`): the
/// context named after the cluster (current) is `lab-admin`'s;
/// `CLUSTER-viewer` is the read-only `lab-viewer`'s (lab-admin acting as
/// lab-viewer: `as:`, the impersonation kubectl and kube-rs send over
/// plain HTTP).
pub fn kubeconfig(server: &str, cluster: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {cluster}\n  cluster:\n    server: {server}\n\
         contexts:\n- name: {cluster}\n  context:\n    cluster: {cluster}\n    user: lab-admin\n\
         - name: {cluster}-viewer\n  context:\n    cluster: {cluster}\n    user: lab-viewer\n\
         current-context: {cluster}\nusers:\n- name: lab-admin\n  user: {{}}\n\
         - name: lab-viewer\n  user:\n    as: lab-viewer\npreferences: {{}}\n"
    )
}

/// Loads `dir`, listens on `addr` and serves in the background on the
/// current runtime; returns the server URL and the lab (for its switches).
pub async fn start(dir: &Path, addr: &str) -> Result<(String, Arc<Lab>), LabError> {
    let store = Store::new(load_dir(dir)?)?;
    let lab = Lab::new(store);
    let listen = |source| LabError::Listen {
        addr: addr.to_string(),
        source,
    };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(listen)?;
    let url = format!("http://{}", listener.local_addr().map_err(listen)?);
    tokio::spawn(serve(listener, lab.clone()));
    Ok((url, lab))
}
