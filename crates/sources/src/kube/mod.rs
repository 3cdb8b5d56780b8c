//! Kubernetes through the `kube` crate: watches (not polls) of GPU nodes,
//! pods, events, PodDisruptionBudgets, and — when their CRDs are served —
//! Kueue and Volcano objects, mapped into the model (see `map`).

pub mod doctor;
pub mod exec;
mod exec_plugin;
pub mod fields;
pub mod map;
pub mod pod;
pub mod slim;

use super::{Origin, SourceError, Update};
use futures_util::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use map::Objects;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How to reach the cluster, as kubectl does.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeConfig {
    /// A kubeconfig file; else `$KUBECONFIG`, `~/.kube/config`, in-cluster.
    pub kubeconfig: Option<PathBuf>,
    /// A context of the kubeconfig; else its current context.
    pub context: Option<String>,
    /// Only this namespace's pods, events and Kueue/Volcano objects.
    pub namespace: Option<String>,
    /// The cluster's name when the config sets it; else the context's cluster.
    pub cluster_name: Option<String>,
    /// A watch that has seen nothing for this long is asked again (kube's
    /// watcher re-watches every `timeout` anyway); also the staleness unit.
    pub interval: Duration,
    /// How long a drain retries evictions that a PodDisruptionBudget refuses.
    pub evict_timeout: Duration,
    /// The longest wait for a connection or for the next bytes of an answer
    /// (`kube.request_timeout_s`): a server that accepts and never answers
    /// fails a request in this time, never holds it forever.
    pub request_timeout: Duration,
    /// `[validate]`: the check a node passes before it is uncordoned (a
    /// Job pinned to it).
    pub validate: crate::validate::ValidateSpec,
}

impl Default for KubeConfig {
    fn default() -> Self {
        KubeConfig {
            kubeconfig: None,
            context: None,
            namespace: None,
            cluster_name: None,
            interval: Duration::from_secs(10),
            evict_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            validate: Default::default(),
        }
    }
}

/// A connected client and the cluster's name.
pub struct Connection {
    pub client: kube::Client,
    pub cluster: String,
    pub namespace: Option<String>,
    /// The API server's address, named in every error.
    pub url: String,
}

/// An error with its causes, outermost first, each said once: kube's own
/// text is only "ServiceError: client error (Connect)", the reason
/// (refused, a certificate, TLS to a plain-HTTP port, a timeout) is in the
/// sources beneath it.
pub fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(x) = cur {
        // rustls's errors reach us as invalid data on the connection; their
        // own words ("received corrupt message", "invalid peer certificate")
        // do not say that they are TLS's.
        if is_tls(x) && !parts.iter().any(|p| p.starts_with("TLS")) {
            parts.push("TLS handshake failed".into());
        }
        let t = x.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = x.source();
    }
    crate::text::one_line(&parts.join(": "), 400)
}

/// Whether an error is rustls's: invalid data on the connection, however
/// deep in `std::io::Error`s it is wrapped.
fn is_tls(e: &(dyn std::error::Error + 'static)) -> bool {
    e.downcast_ref::<std::io::Error>().is_some_and(|io| {
        io.kind() == std::io::ErrorKind::InvalidData
            || io.get_ref().is_some_and(|inner| is_tls(inner))
    })
}

fn kube_error(what: &str, e: &(dyn std::error::Error + 'static)) -> SourceError {
    SourceError::Unreachable {
        what: what.to_string(),
        detail: causes(e),
    }
}

/// A kubeconfig error in one line. A YAML error is given by its place only:
/// its text quotes the lines around it, and a kubeconfig holds tokens and
/// keys that must never reach a terminal or a log.
fn kubeconfig_error(
    path: Option<&std::path::Path>,
    e: &kube::config::KubeconfigError,
) -> SourceError {
    use kube::config::KubeconfigError;
    let file = path.map_or(String::new(), |p| format!(" {}", p.display()));
    SourceError::Other(match e {
        KubeconfigError::Parse(y) => format!(
            "kubeconfig{file}: not valid YAML{} (its text is not shown: a kubeconfig holds credentials)",
            y.location().map_or(String::new(), |l| format!(
                " at line {}, column {}",
                l.line(),
                l.column()
            ))
        ),
        other => format!(
            "kubeconfig{file}: {}",
            crate::text::one_line(&other.to_string(), 300)
        ),
    })
}

/// Connects as kubectl would: the named kubeconfig (or `$KUBECONFIG`,
/// `~/.kube/config`) and context, else the in-cluster service account.
pub async fn connect(cfg: &KubeConfig) -> Result<Connection, SourceError> {
    use kube::config::{Config, KubeConfigOptions, Kubeconfig};
    let file = match &cfg.kubeconfig {
        Some(p) => Some(Kubeconfig::read_from(p).map_err(|e| kubeconfig_error(Some(p), &e))?),
        None => Kubeconfig::read().ok(),
    };
    let (config, cluster) = match file {
        Some(kc) => {
            let context = cfg.context.clone().or_else(|| kc.current_context.clone());
            let cluster = kc
                .contexts
                .iter()
                .find(|c| Some(&c.name) == context.as_ref())
                .and_then(|c| c.context.as_ref().map(|x| x.cluster.clone()))
                .or(context.clone())
                .unwrap_or_else(|| "kubernetes".into());
            // The kubeconfig's exec plugin, run once bounded before the
            // client runs it unbounded (issue 59: one that hangs hung
            // `doctor` and `get`; one with endless output aborted them).
            if let Some(exec) = exec_plugin::exec_of(&kc, context.as_deref()) {
                exec_plugin::preflight_once(exec, cfg.request_timeout).await?;
            }
            let opts = KubeConfigOptions {
                context: cfg.context.clone(),
                ..KubeConfigOptions::default()
            };
            let config = Config::from_custom_kubeconfig(kc, &opts)
                .await
                .map_err(|e| kubeconfig_error(cfg.kubeconfig.as_deref(), &e))?;
            (config, cluster)
        }
        None => (
            Config::incluster().map_err(|e| {
                SourceError::Other(format!(
                    "no kubeconfig ($KUBECONFIG, ~/.kube/config, --kubeconfig) and not in a cluster: {e}"
                ))
            })?,
            "in-cluster".to_string(),
        ),
    };
    let namespace = cfg.namespace.clone();
    // No silent retries inside the client: a PDB's 429 is reported pod by
    // pod by the drain, and a dead server shows as stale data at once (the
    // watcher has its own backoff).
    let mut config = config;
    config.default_retry = false;
    // Every request has a deadline: connecting, and each wait for the next
    // bytes of an answer (counted from the request, not from when a pooled
    // connection went idle). Watches end on the server's side before it.
    config.connect_timeout = Some(cfg.request_timeout);
    config.read_timeout = Some(cfg.request_timeout);
    config.write_timeout = Some(cfg.request_timeout);
    config.reset_reader_on_write = true;
    let url = config.cluster_url.to_string();
    let client = kube::Client::try_from(config)
        .map_err(|e| kube_error(&format!("kubernetes at {url}"), &e))?;
    Ok(Connection {
        client,
        cluster: cfg.cluster_name.clone().unwrap_or(cluster),
        namespace,
        url,
    })
}

/// What `nightshift doctor` says of a Kubernetes source: where it
/// connects, as which kubeconfig user, and the scheduling kinds the server
/// serves (Kueue, Volcano, Kueue's Topology) at the versions nightshift
/// reads.
#[derive(Debug, Clone)]
pub struct Discovered {
    pub context: Option<String>,
    pub user: Option<String>,
    pub url: String,
    /// The API server's version (`/version`'s gitVersion).
    pub version: Option<String>,
    /// `Workload kueue.x-k8s.io/v1beta1`, one per kind beyond the core's.
    pub kinds: Vec<String>,
    /// What discovery said on the side (a kind served at no version read).
    pub notes: Vec<String>,
}

/// Connects and discovers, as the console would, without reading objects.
pub async fn discover(cfg: &KubeConfig) -> Result<Discovered, SourceError> {
    discover_on(cfg).await.map(|(d, _, _)| d)
}

/// `discover`, with the connection it made and the resources it found.
pub async fn discover_on(
    cfg: &KubeConfig,
) -> Result<(Discovered, Connection, Vec<Watched>), SourceError> {
    let conn = connect(cfg).await?;
    let (watched, notes) = resources(&conn).await?;
    let kc = match &cfg.kubeconfig {
        Some(p) => kube::config::Kubeconfig::read_from(p).ok(),
        None => kube::config::Kubeconfig::read().ok(),
    };
    let context = cfg
        .context
        .clone()
        .or_else(|| kc.as_ref().and_then(|k| k.current_context.clone()));
    let user = kc.as_ref().and_then(|k| {
        k.contexts
            .iter()
            .find(|c| Some(&c.name) == context.as_ref())
            .and_then(|c| c.context.as_ref())
            .and_then(|c| c.user.clone())
    });
    let version = conn
        .client
        .apiserver_version()
        .await
        .ok()
        .map(|v| v.git_version);
    let d = Discovered {
        context,
        user,
        url: conn.url.clone(),
        version,
        kinds: watched
            .iter()
            .filter(|w| !w.resource.group.is_empty())
            .map(|w| format!("{} {}", w.resource.kind, w.resource.api_version))
            .collect(),
        notes,
    };
    Ok((d, conn, watched))
}

/// One watched (or listed) resource.
#[derive(Debug, Clone)]
pub struct Watched {
    /// A [`map::KINDS`] entry.
    pub kind: &'static str,
    pub resource: ApiResource,
    pub namespaced: bool,
}

fn core(kind: &'static str, group: &str, version: &str, k: &str, namespaced: bool) -> Watched {
    Watched {
        kind,
        resource: ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, k),
            kind,
        ),
        namespaced,
    }
}

/// The resources to read: the built-in ones, and the Kueue and Volcano
/// kinds whose CRDs the server serves (discovery says; absent ones are
/// logged once and not used). Returns notes for the log. A server that does
/// not answer is an error, never taken for one without Kueue or Volcano.
pub async fn resources(conn: &Connection) -> Result<(Vec<Watched>, Vec<String>), SourceError> {
    let mut out = vec![
        core("nodes", "", "v1", "Node", false),
        core("pods", "", "v1", "Pod", true),
        core("events", "", "v1", "Event", true),
        core(
            "poddisruptionbudgets",
            "policy",
            "v1",
            "PodDisruptionBudget",
            true,
        ),
    ];
    let mut notes = Vec::new();
    for (group, kinds) in [
        (
            "kueue.x-k8s.io",
            &[
                "workloads",
                "clusterqueues",
                "localqueues",
                "resourceflavors",
                "workloadpriorityclasses",
                "topologies",
            ][..],
        ),
        ("scheduling.volcano.sh", &["podgroups", "queues"][..]),
    ] {
        match kube::discovery::oneshot::group(&conn.client, group).await {
            Ok(g) => {
                let served = g.recommended_resources();
                // A kind the preferred version lacks may be served at
                // another (Kueue up to 0.13: Topology at v1alpha1 only,
                // beside v1beta1's workloads): every served version is read.
                let other = |want: &str| {
                    g.versions()
                        .flat_map(|v| g.versioned_resources(v))
                        .find(|(r, _)| r.plural == want)
                };
                for want in kinds {
                    let found = served
                        .iter()
                        .find(|(r, _)| r.plural == *want)
                        .cloned()
                        .or_else(|| other(want));
                    match found.as_ref() {
                        Some((r, caps)) => {
                            if let Some(k) = map::KINDS.iter().find(|k| *k == want) {
                                out.push(Watched {
                                    kind: k,
                                    resource: r.clone(),
                                    namespaced: caps.scope == kube::discovery::Scope::Namespaced,
                                });
                            }
                        }
                        None => notes.push(format!("{group} is served without {want}: not read")),
                    }
                }
            }
            Err(kube::Error::Discovery(e)) => notes.push(format!(
                "{group} is not served (no CRD): not used ({})",
                crate::text::one_line(&e.to_string(), 300)
            )),
            Err(e) => {
                return Err(kube_error(
                    &format!("kubernetes at {} (discovery of {group})", conn.url),
                    &e,
                ));
            }
        }
    }
    Ok((out, notes))
}

/// Kueue's visibility API, when served: each ClusterQueue's pending
/// workloads and their place in line, as `pendingworkloads` objects.
pub async fn queue_positions(client: &kube::Client, cluster_queues: &[String]) -> Vec<Value> {
    let mut out = Vec::new();
    for cq in cluster_queues {
        let path = format!("/apis/{VISIBILITY}/v1beta1/clusterqueues/{cq}/pendingworkloads");
        let Ok(req) = http::Request::get(&path).body(Vec::new()) else {
            continue;
        };
        let Ok(summary) = client.request::<Value>(req).await else {
            continue;
        };
        for item in summary["items"].as_array().into_iter().flatten() {
            out.push(serde_json::json!({
                "kind": "PendingWorkload",
                "metadata": {"namespace": item["metadata"]["namespace"], "name": item["metadata"]["name"]},
                "clusterQueue": cq,
                "position": item["positionInClusterQueue"],
            }));
        }
    }
    out
}

const VISIBILITY: &str = "visibility.kueue.x-k8s.io";

/// Whether Kueue's visibility API is served (an aggregated API: discovery
/// lists it when Kueue's visibility server runs).
pub async fn visibility_served(client: &kube::Client) -> bool {
    kube::discovery::oneshot::group(client, VISIBILITY)
        .await
        .is_ok()
}

fn cluster_queue_names(o: &Objects) -> Vec<String> {
    o.of("clusterqueues")
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

fn api(conn: &Connection, w: &Watched) -> Api<DynamicObject> {
    match (&conn.namespace, w.namespaced) {
        (Some(ns), true) => Api::namespaced_with(conn.client.clone(), ns, &w.resource),
        _ => Api::all_with(conn.client.clone(), &w.resource),
    }
}

/// The object as JSON (`Objects::insert` keeps what the map reads of it).
fn value(o: &DynamicObject, w: &Watched) -> Value {
    let mut v = serde_json::to_value(o).unwrap_or(Value::Null);
    // Lists leave kind out of their items; the map sorts by it.
    if v["kind"].is_null() {
        v["kind"] = Value::String(w.resource.kind.clone());
        v["apiVersion"] = Value::String(w.resource.api_version.clone());
    }
    v
}

/// Objects per page of a list (kubectl's and kube's watcher's default).
const LIST_PAGE: u32 = 500;

/// Everything, listed once (for `get`, `why`, … and actions).
pub async fn fetch_once(cfg: &KubeConfig) -> Result<crate::model::Cluster, SourceError> {
    let conn = connect(cfg).await?;
    let (watched, notes) = resources(&conn).await?;
    for n in notes {
        tracing::info!("{n}");
    }
    let mut objects = Objects::default();
    for w in &watched {
        // In pages, each slimmed before the next is read: 40,000 pods are
        // never all held whole at once.
        let mut params = ListParams::default().limit(LIST_PAGE);
        loop {
            let list = api(&conn, w)
                .list(&params)
                .await
                .map_err(|e| api_error(&format!("list {} at {}", w.kind, conn.url), e))?;
            let next = list.metadata.continue_.clone().filter(|c| !c.is_empty());
            for o in list.items {
                objects.insert(w.kind, value(&o, w));
            }
            match next {
                Some(c) => params = params.continue_token(&c),
                None => break,
            }
        }
    }
    if visibility_served(&conn.client).await {
        let cqs = cluster_queue_names(&objects);
        let positions = queue_positions(&conn.client, &cqs).await;
        objects.replace_values("pendingworkloads", positions);
    }
    let m = map::cluster(&conn.cluster, &objects, crate::host::now());
    for w in &m.warnings {
        tracing::warn!("kube: {w}");
        crate::text::warn(w);
    }
    Ok(m.cluster)
}

/// A kube error as the source's error type.
pub fn api_error(what: &str, e: kube::Error) -> SourceError {
    match e {
        kube::Error::Api(s) => {
            let msg = crate::text::one_line(&s.message, 300);
            match s.code {
                401 | 403 => SourceError::Auth {
                    what: what.into(),
                    status: s.code,
                    detail: msg,
                },
                404 => SourceError::NotFound {
                    what: what.into(),
                    detail: format!(": {msg}"),
                },
                _ => SourceError::Api {
                    what: what.into(),
                    errors: vec![format!("HTTP {}: {msg}", s.code)],
                },
            }
        }
        other => kube_error(what, &other),
    }
}

/// The `timeoutSeconds` of a watch: a little under the read deadline, so
/// that a quiet watch ends on the server's side and is resumed.
fn watch_timeout_s(read: Duration) -> u32 {
    read.as_secs().saturating_sub(5).clamp(1, 290) as u32
}

enum Msg {
    Init(&'static str),
    InitApply(&'static str, Value),
    InitDone(&'static str),
    Apply(&'static str, Value),
    Delete(&'static str, String),
    Failed(&'static str, String),
    /// A kind read whole by polling (Kueue's queue positions).
    Replace(&'static str, Vec<Value>),
}

/// Watches until the receiver is dropped: a snapshot whenever something
/// changed (at most every 250 ms), a heartbeat while every watch is
/// healthy, an error (the data goes stale) while one is not. A watch
/// resumed after a 410 Gone re-lists, and the old objects stand until the
/// new list is complete.
pub async fn run(cfg: KubeConfig, out: impl Into<crate::assemble::Outlet>) {
    let mut tx = out.into();
    let Some((conn, watched)) = connect_until_up(&cfg, &mut tx).await else {
        return;
    };
    let conn = Arc::new(conn);
    let kinds: Vec<&str> = watched.iter().map(|w| w.kind).collect();
    tracing::info!("kube: listing {} from {}", kinds.join(", "), conn.url);
    let (mtx, mut mrx) = mpsc::channel::<Msg>(1024);
    let mut tasks = Vec::new();
    let cfg_timeout = cfg.request_timeout;
    for w in watched.clone() {
        tasks.push(spawn_watch(conn.clone(), w, cfg_timeout, mtx.clone()));
    }
    // Kueue's queue positions are not watchable: polled, when served.
    if visibility_served(&conn.client).await {
        tasks.push(spawn_positions(
            conn.clone(),
            &watched,
            cfg.interval,
            mtx.clone(),
        ));
    }
    drop(mtx);
    let mut lists = Lists::default();
    let mut warned: std::collections::HashSet<String> = Default::default();
    let began = tokio::time::Instant::now();
    let mut said_waiting = false;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut last_ok = tokio::time::Instant::now();
    let heartbeat = (cfg.interval / 3).max(Duration::from_secs(1));
    loop {
        tokio::select! {
            m = mrx.recv() => {
                let Some(m) = m else { break };
                if let Some((k, e)) = lists.take(m) {
                    tracing::warn!("kube watch {k}: {e}");
                    let first = lists.failing.is_empty();
                    lists.failing.insert(k, e.clone());
                    if first {
                        let err = SourceError::Unreachable { what: format!("kubernetes ({k} watch)"), detail: e };
                        if tx.send(Update::failed(Origin::Scheduler, err)).await.is_err() { break; }
                    }
                }
            }
            _ = tick.tick() => {
                let ready = watched.iter().all(|w| lists.listed.contains(w.kind));
                if !ready && !said_waiting && began.elapsed() >= Duration::from_secs(3) {
                    // The first list is slow: say what it waits for.
                    said_waiting = true;
                    let missing: Vec<&str> = watched.iter().map(|w| w.kind).filter(|k| !lists.listed.contains(k)).collect();
                    let note = format!("kubernetes at {}: waiting for the first list of {}", conn.url, missing.join(", "));
                    tracing::info!("{note}");
                    if tx.send(Update::Notice(note)).await.is_err() { break; }
                }
                let mut just_sent = false;
                if ready && lists.dirty {
                    lists.dirty = false;
                    just_sent = true;
                    let m = map::cluster(&conn.cluster, &lists.objects, crate::host::now());
                    // Each skipped object is logged once, not every snapshot.
                    for w in m.warnings.iter().filter(|w| !warned.contains(*w)) {
                        tracing::warn!("kube: {w}");
                    }
                    warned = m.warnings.into_iter().collect();
                    if tx.send(Update::Snapshot(Arc::new(m.cluster))).await.is_err() { break; }
                }
                if !lists.failing.is_empty() && last_ok.elapsed() >= heartbeat {
                    // A watch that resumed quietly says nothing: ask the
                    // server whether it answers again.
                    last_ok = tokio::time::Instant::now();
                    let probe = tokio::time::timeout(Duration::from_secs(2), conn.client.apiserver_version()).await;
                    if matches!(probe, Ok(Ok(_))) {
                        lists.failing.clear();
                    }
                }
                if ready && lists.failing.is_empty() && (last_ok.elapsed() >= heartbeat || just_sent) {
                    last_ok = tokio::time::Instant::now();
                    if tx.send(Update::ok(Origin::Scheduler)).await.is_err() { break; }
                }
            }
        }
    }
    for t in tasks {
        t.abort();
    }
}

/// Connected and discovered, or said why not and tried again: a server
/// that is down at start is asked again until it answers, and only then
/// is it known whether Kueue and Volcano are there. `None`: nobody listens.
async fn connect_until_up(
    cfg: &KubeConfig,
    tx: &mut crate::assemble::Outlet,
) -> Option<(Connection, Vec<Watched>)> {
    loop {
        let found = match connect(cfg).await {
            Ok(conn) => resources(&conn).await.map(|(w, notes)| (conn, w, notes)),
            Err(e) => Err(e),
        };
        match found {
            Ok((conn, watched, notes)) => {
                for n in &notes {
                    tracing::info!("kube: {n}");
                }
                return Some((conn, watched));
            }
            Err(e) => {
                tracing::warn!("kube: {e}");
                if tx.send(Update::failed(Origin::Scheduler, e)).await.is_err() {
                    return None;
                }
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
    }
}

/// One kind's watch, its events as messages.
fn spawn_watch(
    conn: Arc<Connection>,
    w: Watched,
    cfg_timeout: Duration,
    mtx: mpsc::Sender<Msg>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        // The server ends each watch before the client's read deadline.
        let wc = watcher::Config::default().timeout(watch_timeout_s(cfg_timeout));
        let stream = watcher(api(&conn, &w), wc).default_backoff();
        futures_util::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            let msg = match ev {
                Ok(watcher::Event::Init) => Msg::Init(w.kind),
                Ok(watcher::Event::InitApply(o)) => Msg::InitApply(w.kind, value(&o, &w)),
                Ok(watcher::Event::InitDone) => Msg::InitDone(w.kind),
                Ok(watcher::Event::Apply(o)) => Msg::Apply(w.kind, value(&o, &w)),
                Ok(watcher::Event::Delete(o)) => Msg::Delete(w.kind, map::key(&value(&o, &w))),
                Err(e) => Msg::Failed(w.kind, format!("{}: {}", conn.url, causes(&e))),
            };
            if mtx.send(msg).await.is_err() {
                return;
            }
        }
    })
}

/// Kueue's queue positions, polled every `interval` (at most every second).
fn spawn_positions(
    conn: Arc<Connection>,
    watched: &[Watched],
    interval: Duration,
    mtx: mpsc::Sender<Msg>,
) -> tokio::task::JoinHandle<()> {
    let every = interval.max(Duration::from_secs(1));
    let cqs_kind = watched.iter().find(|w| w.kind == "clusterqueues").cloned();
    tokio::spawn(async move {
        let Some(cq_watch) = cqs_kind else { return };
        loop {
            let cqs: Vec<String> = match api(&conn, &cq_watch).list(&ListParams::default()).await {
                Ok(l) => l
                    .items
                    .iter()
                    .filter_map(|c| c.metadata.name.clone())
                    .collect(),
                Err(_) => Vec::new(),
            };
            let pos = queue_positions(&conn.client, &cqs).await;
            if mtx
                .send(Msg::Replace("pendingworkloads", pos))
                .await
                .is_err()
            {
                return;
            }
            tokio::time::sleep(every).await;
        }
    })
}

/// The objects as the watches list them: each kind's first list is
/// buffered until it is complete (a re-list after a 410 Gone leaves the
/// old objects standing until then).
#[derive(Default)]
struct Lists {
    objects: Objects,
    buffers: std::collections::HashMap<&'static str, Objects>,
    listed: std::collections::HashSet<&'static str>,
    failing: std::collections::HashMap<&'static str, String>,
    /// Changed since the last snapshot.
    dirty: bool,
}

impl Lists {
    /// Takes in one watch message; a watch's failure is handed back.
    fn take(&mut self, m: Msg) -> Option<(&'static str, String)> {
        match m {
            Msg::Init(k) => {
                self.buffers.insert(k, Default::default());
            }
            Msg::InitApply(k, v) => {
                self.buffers.entry(k).or_default().insert(k, v);
            }
            Msg::InitDone(k) => {
                let fresh = self.buffers.remove(&k).unwrap_or_default();
                self.objects.replace_kind(k, fresh);
                self.listed.insert(k);
                self.failing.remove(k);
                self.dirty = true;
            }
            Msg::Apply(k, v) => {
                self.objects.insert(k, v);
                self.failing.remove(k);
                self.dirty = true;
            }
            Msg::Delete(k, key) => {
                self.objects.remove(k, &key);
                self.failing.remove(k);
                self.dirty = true;
            }
            Msg::Replace(k, values) => {
                if self.objects.replace_values(k, values) {
                    self.dirty = true;
                }
            }
            Msg::Failed(k, e) => return Some((k, e)),
        }
        None
    }
}
