//! The lab API server's HTTP side: discovery, list, get, watch, patch,
//! delete and the eviction subresource, answered as kube-apiserver does.

use super::discovery::{AUTHORIZATION, VISIBILITY, groups, kueue_served, resource_list};
use super::response::{Body, fail, reply};
use super::store::{Failure, Store, field_query, label_query};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

/// The server's state: the store, plus the switches tests pull.
pub struct Lab {
    pub store: Mutex<Store>,
    /// Bumped to end every open watch (a dropped connection).
    cut: watch::Sender<u64>,
    /// Until then, every request is answered 503 (an API server down).
    down_until: Mutex<Option<Instant>>,
    pub bookmark_every: Duration,
    /// Watches answered 410 Gone, and lists served: what a test checks to
    /// know that a client re-listed after a 410.
    pub gone_served: std::sync::atomic::AtomicU64,
    pub lists_served: std::sync::atomic::AtomicU64,
    /// Pods' logs, by `NAMESPACE/NAME`: what the kubelet would serve.
    pub logs: Mutex<std::collections::HashMap<String, PodLog>>,
    /// Every write the API was asked for (not the lab's own `/lab/`
    /// switches), in order: what a test compares with what a client
    /// said it would send.
    pub writes: Mutex<Vec<Write>>,
}

/// One write request as received: its method, its path (without the
/// query) and its body, parsed when it is JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    /// Who sent it: its User-Agent (kubectl's or the client's).
    pub agent: String,
    pub method: String,
    pub path: String,
    pub body: Option<Value>,
}

impl std::fmt::Display for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.body {
            Some(b) => write!(f, "{} {} {b}", self.method, self.path),
            None => write!(f, "{} {}", self.method, self.path),
        }
    }
}

/// A pod's log as kube-lab serves it (`POST /lab/log?pod=NS/NAME` with
/// this as JSON): `lines` repeated `times`, then `last`; or, `endless`, a
/// log that never ends (a server that ignores `limitBytes`).
#[derive(Debug, Clone, Default)]
pub struct PodLog {
    pub lines: String,
    pub times: u64,
    pub last: String,
    pub endless: bool,
}

impl PodLog {
    fn from_json(v: &Value) -> PodLog {
        let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        PodLog {
            lines: text("lines"),
            times: v["times"].as_u64().unwrap_or(0),
            last: text("last"),
            endless: v["endless"].as_bool().unwrap_or(false),
        }
    }

    /// The log's text with the API server's options applied as its
    /// documentation (PodLogOptions) says: `tailLines` — "the number of
    /// lines from the end of the logs to show" — then `limitBytes` — "the
    /// number of bytes to read from the server before terminating the log
    /// output".
    fn text(&self, tail_lines: Option<u64>, limit_bytes: Option<u64>) -> Vec<u8> {
        let body_lines = self.lines.lines().count() as u64;
        let last_lines = self.last.lines().count() as u64;
        let total = body_lines * self.times + last_lines;
        let skip = tail_lines.map_or(0, |t| total.saturating_sub(t));
        let mut out = Vec::new();
        let limit = limit_bytes.unwrap_or(u64::MAX);
        let lines = (0..self.times)
            .flat_map(|_| self.lines.lines())
            .chain(self.last.lines());
        for l in lines.skip(skip as usize) {
            if out.len() as u64 >= limit {
                break;
            }
            out.extend_from_slice(l.as_bytes());
            out.push(b'\n');
        }
        out.truncate(limit.min(out.len() as u64) as usize);
        out
    }
}

impl Lab {
    pub fn new(store: Store) -> Arc<Lab> {
        Arc::new(Lab {
            store: Mutex::new(store),
            cut: watch::channel(0).0,
            down_until: Mutex::new(None),
            bookmark_every: Duration::from_secs(5),
            gone_served: Default::default(),
            lists_served: Default::default(),
            logs: Default::default(),
            writes: Default::default(),
        })
    }

    /// The writes received so far (see [`Lab::writes`]).
    pub fn writes_so_far(&self) -> Vec<Write> {
        self.writes.lock().map(|w| w.clone()).unwrap_or_default()
    }

    /// Ends every open watch stream, as a dropped connection would.
    pub fn cut_watches(&self) {
        self.cut.send_modify(|n| *n += 1);
    }
}

/// Serves until the listener fails.
pub async fn serve(listener: TcpListener, lab: Arc<Lab>) {
    loop {
        let Ok((conn, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let lab = lab.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let lab = lab.clone();
                async move { Ok::<_, Infallible>(handle(lab, req).await) }
            });
            let io = hyper_util::rt::TokioIo::new(conn);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

fn query_param<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

fn decode(s: &str) -> String {
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
            (b'+', _, _) => out.push(b' '),
            (c, _, _) => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn handle(
    lab: Arc<Lab>,
    req: hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<Body> {
    let down = lab
        .down_until
        .lock()
        .ok()
        .and_then(|d| *d)
        .is_some_and(|t| Instant::now() < t);
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    if down && !path.starts_with("/lab/") {
        return fail(Failure::new(
            503,
            "ServiceUnavailable",
            "the lab API server is down",
        ));
    }
    let method = req.method().clone();
    let header = |name| req.headers().get(name).and_then(|v| v.to_str().ok());
    let user = match crate::rbac::user_of(
        header(hyper::header::AUTHORIZATION.as_str()),
        header("impersonate-user"),
    ) {
        Ok(u) => u,
        Err(f) => return fail(f),
    };
    let agent = req
        .headers()
        .get(hyper::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let ctype = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = match http_body_util::Limited::new(req.into_body(), 8 << 20)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => return fail(Failure::new(413, "RequestEntityTooLarge", "body too large")),
    };
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let review = segs.as_slice() == ["apis", AUTHORIZATION, "v1", "selfsubjectaccessreviews"];
    if segs.first() != Some(&"lab") && !review {
        let watch = matches!(query_param(&query, "watch"), Some("true" | "1"));
        let verb = crate::rbac::verb_of(method.as_str(), &segs, watch);
        if !user.may(verb) {
            return fail(crate::rbac::forbidden(user, verb, &segs));
        }
    }
    if method != hyper::Method::GET
        && segs.first() != Some(&"lab")
        && !review
        && let Ok(mut w) = lab.writes.lock()
    {
        w.push(Write {
            agent: agent.clone(),
            method: method.to_string(),
            path: path.clone(),
            body: serde_json::from_slice(&body).ok(),
        });
    }
    match (method.as_str(), segs.as_slice()) {
        ("GET", ["version"]) => reply(
            200,
            &json!({"major": "1", "minor": "32", "gitVersion": "v1.32.0-nightshift-kube-lab",
                "platform": "linux/amd64"}),
        ),
        ("GET", ["api"]) => reply(
            200,
            &json!({"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}),
        ),
        ("GET", ["apis"]) => reply(200, &groups(&lab.store)),
        ("GET", ["apis", AUTHORIZATION, "v1"]) => reply(200, &crate::rbac::resource_list()),
        ("POST", ["apis", AUTHORIZATION, "v1", "selfsubjectaccessreviews"]) => {
            let read = if ctype.starts_with("application/vnd.kubernetes.protobuf") {
                crate::rbac::review_from_protobuf(&body)
                    .ok_or_else(|| Failure::new(400, "BadRequest", "not a protobuf review"))
            } else {
                serde_json::from_slice::<Value>(&body)
                    .map_err(|e| Failure::new(400, "BadRequest", e.to_string()))
            };
            match read.and_then(|b| crate::rbac::review(user, &b)) {
                Ok(v) => reply(201, &v),
                Err(f) => fail(f),
            }
        }
        ("GET", ["api", v]) => resource_list(&lab.store, "", v),
        ("GET", ["apis", VISIBILITY, "v1beta1"]) if kueue_served(&lab.store) => reply(
            200,
            &json!({"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": format!("{VISIBILITY}/v1beta1"),
                "resources": [
                    {"name": "clusterqueues", "singularName": "clusterqueue", "namespaced": false,
                        "kind": "ClusterQueue", "verbs": ["get"]},
                    {"name": "clusterqueues/pendingworkloads", "singularName": "", "namespaced": false,
                        "kind": "PendingWorkloadsSummary", "verbs": ["get"]}]}),
        ),
        (
            "GET",
            [
                "apis",
                VISIBILITY,
                "v1beta1",
                "clusterqueues",
                cq,
                "pendingworkloads",
            ],
        ) => match lab.store.lock().ok().and_then(|s| s.pending_workloads(cq)) {
            Some(v) => reply(200, &v),
            None => fail(Failure::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            )),
        },
        ("GET", ["apis", g, v]) => resource_list(&lab.store, g, v),
        ("POST", ["lab", "compact"]) => {
            if let Ok(mut s) = lab.store.lock() {
                s.compact();
            }
            reply(200, &json!({"compacted": true}))
        }
        ("POST", ["lab", "cut-watches"]) => {
            lab.cut_watches();
            reply(200, &json!({"cut": true}))
        }
        ("POST", ["lab", "down"]) => {
            let secs: f64 = query_param(&query, "seconds")
                .and_then(|s| s.parse().ok())
                .unwrap_or(5.0);
            if let Ok(mut d) = lab.down_until.lock() {
                *d = Some(Instant::now() + Duration::from_secs_f64(secs.max(0.0)));
            }
            lab.cut_watches();
            reply(200, &json!({"down_s": secs}))
        }
        ("POST", ["lab", "log"]) => {
            let Some(pod) = query_param(&query, "pod").map(decode) else {
                return fail(Failure::new(400, "BadRequest", "pod=NS/NAME"));
            };
            match serde_json::from_slice::<Value>(&body) {
                Ok(v) => {
                    if let Ok(mut logs) = lab.logs.lock() {
                        logs.insert(pod, PodLog::from_json(&v));
                    }
                    reply(200, &json!({"log": true}))
                }
                Err(e) => fail(Failure::new(400, "BadRequest", e.to_string())),
            }
        }
        ("GET", ["api", "v1", "namespaces", ns, "pods", name, "log"]) => {
            pod_log(&lab, ns, name, &query)
        }
        ("POST", ["lab", "apply"]) => match serde_json::from_slice::<Value>(&body) {
            Ok(o) => match lab.store.lock() {
                Ok(mut s) => match s.put(o) {
                    Ok(o) => reply(200, &o),
                    Err(f) => fail(f),
                },
                Err(_) => fail(Failure::new(500, "InternalError", "store poisoned")),
            },
            Err(e) => fail(Failure::new(400, "BadRequest", e.to_string())),
        },
        (_, ["api", v, rest @ ..]) => object(&lab, &method, "", v, rest, &query, &ctype, &body),
        (_, ["apis", g, v, rest @ ..]) => object(&lab, &method, g, v, rest, &query, &ctype, &body),
        _ => fail(Failure::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )),
    }
}

#[allow(clippy::too_many_arguments)]
fn object(
    lab: &Arc<Lab>,
    method: &hyper::Method,
    group: &str,
    version: &str,
    rest: &[&str],
    query: &str,
    ctype: &str,
    body: &Bytes,
) -> hyper::Response<Body> {
    // [namespaces, ns, plural, name?, sub?] or [plural, name?, sub?]
    let (ns, rest) = match rest {
        ["namespaces", ns, plural, more @ ..] => (Some(*ns), {
            let mut v = vec![*plural];
            v.extend_from_slice(more);
            v
        }),
        other => (None, other.to_vec()),
    };
    let (plural, name, sub) = (
        rest.first().copied(),
        rest.get(1).copied(),
        rest.get(2).copied(),
    );
    let Some(plural) = plural else {
        return fail(Failure::new(404, "NotFound", "no resource named"));
    };
    let Ok(mut s) = lab.store.lock() else {
        return fail(Failure::new(500, "InternalError", "store poisoned"));
    };
    let Some(r) = s.resource(group, version, plural) else {
        return fail(Failure::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
    };
    let ns_key = if s.resources[r].namespaced {
        ns.unwrap_or("")
    } else {
        ""
    };
    match (method.as_str(), name, sub) {
        ("GET", None, _) => {
            let labels = query_param(query, "labelSelector").map(decode);
            let fields = query_param(query, "fieldSelector").map(decode);
            let keep = move |o: &Value| {
                labels
                    .as_deref()
                    .is_none_or(|q| label_query(q, &o["metadata"]["labels"]))
                    && fields.as_deref().is_none_or(|q| field_query(q, o))
            };
            if matches!(query_param(query, "watch"), Some("true" | "1")) {
                let from = query_param(query, "resourceVersion")
                    .and_then(|v| v.parse::<u64>().ok())
                    .filter(|v| *v > 0);
                let bookmarks = query_param(query, "allowWatchBookmarks") == Some("true");
                let timeout = query_param(query, "timeoutSeconds")
                    .and_then(|v| v.parse::<u64>().ok())
                    .map(Duration::from_secs);
                let ns_filter = ns.map(str::to_string);
                drop(s);
                return watch_stream(
                    lab.clone(),
                    r,
                    ns_filter,
                    from,
                    bookmarks,
                    timeout,
                    Box::new(keep),
                );
            }
            lab.lists_served
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let res = &s.resources[r];
            // Pages, as kube-apiserver serves them: `limit` items, and a
            // `continue` token for the rest (here the next item's place;
            // the store's order is stable).
            let limit = query_param(query, "limit")
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|l| *l > 0);
            let from = query_param(query, "continue")
                .map(decode)
                .and_then(|c| c.parse::<usize>().ok())
                .unwrap_or(0);
            let mut matching = s.list(r, ns).into_iter().filter(|o| keep(o)).skip(from);
            let items: Vec<Value> = match limit {
                Some(l) => matching.by_ref().take(l).cloned().collect(),
                None => matching.by_ref().cloned().collect(),
            };
            let rest = matching.count();
            let mut metadata = json!({"resourceVersion": s.resource_version().to_string()});
            if rest > 0 {
                metadata["continue"] = json!((from + items.len()).to_string());
                metadata["remainingItemCount"] = json!(rest);
            }
            reply(
                200,
                &json!({"kind": format!("{}List", res.kind), "apiVersion": res.group_version(),
                    "metadata": metadata,
                    "items": items}),
            )
        }
        ("GET", Some(name), None | Some("status")) => match s.get(r, ns_key, name) {
            Some(o) => reply(200, o),
            None => fail(s.not_found(r, name)),
        },
        ("PATCH", Some(name), None | Some("status")) => {
            if ctype.starts_with("application/json-patch")
                || ctype.starts_with("application/apply-patch")
            {
                return fail(Failure::new(
                    415,
                    "UnsupportedMediaType",
                    format!("the lab serves merge and strategic-merge patches, not {ctype}"),
                ));
            }
            match serde_json::from_slice::<Value>(body) {
                Ok(p) => match s.patch(r, ns_key, name, &p) {
                    Ok(o) => reply(200, &o),
                    Err(f) => fail(f),
                },
                Err(e) => fail(Failure::new(400, "BadRequest", e.to_string())),
            }
        }
        ("DELETE", Some(name), None) => match s.delete(r, ns_key, name) {
            Ok(o) => reply(200, &o),
            Err(f) => fail(f),
        },
        // Create, as kube-apiserver does: the collection's kind, the path's
        // namespace, 409 when the name is taken.
        ("POST", None, None) => match serde_json::from_slice::<Value>(body) {
            Ok(mut o) => {
                let res = &s.resources[r];
                if o["kind"] != res.kind.as_str() {
                    return fail(Failure::new(
                        400,
                        "BadRequest",
                        format!("a {} cannot be created in {}", o["kind"], res.plural),
                    ));
                }
                o["apiVersion"] = json!(res.group_version());
                if res.namespaced {
                    o["metadata"]["namespace"] = json!(ns_key);
                }
                let name = o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if s.get(r, ns_key, &name).is_some() {
                    return fail(Failure::new(
                        409,
                        "AlreadyExists",
                        format!("{} {name:?} already exists", res.plural),
                    ));
                }
                match s.put(o) {
                    Ok(o) => reply(201, &o),
                    Err(f) => fail(f),
                }
            }
            Err(e) => fail(Failure::new(400, "BadRequest", e.to_string())),
        },
        ("POST", Some(name), Some("eviction")) if s.resources[r].kind == "Pod" => {
            match s.evict(ns_key, name) {
                Ok(()) => reply(
                    201,
                    &json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                        "status": "Success", "code": 201}),
                ),
                Err(f) => fail(f),
            }
        }
        _ => fail(Failure::new(
            405,
            "MethodNotAllowed",
            format!("the lab does not serve {method} here"),
        )),
    }
}

/// A `watch=true` stream: the changes since `from` (or every object as
/// ADDED when no version is given), then each new change, with bookmarks
/// when asked; 410 Gone as an ERROR event when `from` is compacted away.
fn watch_stream(
    lab: Arc<Lab>,
    r: usize,
    ns: Option<String>,
    from: Option<u64>,
    bookmarks: bool,
    timeout: Option<Duration>,
    keep: Box<dyn Fn(&Value) -> bool + Send>,
) -> hyper::Response<Body> {
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let in_ns = move |o: &Value| {
        ns.as_deref()
            .is_none_or(|n| o["metadata"]["namespace"].as_str() == Some(n))
    };
    let line =
        |kind: &str, o: &Value| Bytes::from(format!("{}\n", json!({"type": kind, "object": o})));
    let (initial, mut changes, mut last, api, kind) = {
        let Ok(s) = lab.store.lock() else {
            return fail(Failure::new(500, "InternalError", "store poisoned"));
        };
        let res = &s.resources[r];
        let initial: Result<Vec<Bytes>, u64> = match from {
            None => Ok(s
                .list(r, None)
                .into_iter()
                .filter(|o| in_ns(o) && keep(o))
                .map(|o| line("ADDED", o))
                .collect()),
            Some(v) => match s.since(v) {
                Some(cs) => Ok(cs
                    .iter()
                    .filter(|c| c.resource == r && in_ns(&c.object) && keep(&c.object))
                    .map(|c| line(c.kind, &c.object))
                    .collect()),
                None => Err(v),
            },
        };
        (
            initial,
            s.subscribe(),
            s.resource_version(),
            res.group_version(),
            res.kind.clone(),
        )
    };
    let mut cut = lab.cut.subscribe();
    tokio::spawn(async move {
        let lines = match initial {
            Ok(l) => l,
            Err(v) => {
                lab.gone_served
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let gone = Failure::new(
                    410,
                    "Expired",
                    format!("too old resource version: {v} ({last})"),
                );
                let _ = tx.send(line("ERROR", &gone.status())).await;
                return;
            }
        };
        for l in lines {
            if tx.send(l).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::Instant::now() + timeout.unwrap_or(Duration::from_secs(1800));
        let mut tick = tokio::time::interval(lab.bookmark_every);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return,
                _ = cut.changed() => return,
                _ = tick.tick(), if bookmarks => {
                    let rv = lab.store.lock().map(|s| s.resource_version()).unwrap_or(last);
                    last = last.max(rv);
                    let mark = json!({"kind": kind, "apiVersion": api,
                        "metadata": {"resourceVersion": last.to_string()}});
                    if tx.send(line("BOOKMARK", &mark)).await.is_err() { return; }
                }
                c = changes.recv() => {
                    let Ok(c) = c else { return };  // lagged or closed: the client resumes
                    if c.rv <= last { continue; }
                    last = c.rv;
                    if c.resource == r && in_ns(&c.object) && keep(&c.object)
                        && tx.send(line(c.kind, &c.object)).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    let mut resp = hyper::Response::new(BodyExt::boxed(StreamBody::new(stream)));
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

/// `GET /api/v1/namespaces/NS/pods/NAME/log`: the pod's log (404 for a pod
/// that is not there), plain text.
fn pod_log(lab: &Lab, ns: &str, name: &str, query: &str) -> hyper::Response<Body> {
    let exists = lab.store.lock().is_ok_and(|s| {
        s.resource("", "v1", "pods")
            .is_some_and(|r| s.get(r, ns, name).is_some())
    });
    if !exists {
        return fail(Failure::new(
            404,
            "NotFound",
            format!("pods \"{name}\" not found"),
        ));
    }
    let log = lab
        .logs
        .lock()
        .ok()
        .and_then(|l| l.get(&format!("{ns}/{name}")).cloned())
        .unwrap_or_default();
    let num = |k: &str| query_param(query, k).and_then(|v| v.parse::<u64>().ok());
    let body: Body = if log.endless {
        let stream = futures_util::stream::repeat_with(|| {
            Ok::<_, Infallible>(Frame::data(Bytes::from(vec![b'x'; 1 << 16])))
        });
        BodyExt::boxed(StreamBody::new(stream))
    } else {
        Full::new(Bytes::from(log.text(num("tailLines"), num("limitBytes")))).boxed()
    };
    let mut resp = hyper::Response::new(body);
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain"),
    );
    resp
}

#[cfg(test)]
mod log_tests {
    use super::PodLog;

    #[test]
    fn tail_lines_then_limit_bytes_as_the_api_documents() {
        let l = PodLog {
            lines: "a\nb\n".into(),
            times: 3,
            last: "GPU 3 lost\n".into(),
            endless: false,
        };
        assert_eq!(l.text(None, None), b"a\nb\na\nb\na\nb\nGPU 3 lost\n");
        assert_eq!(l.text(Some(2), None), b"b\nGPU 3 lost\n");
        assert_eq!(l.text(Some(2), Some(4)), b"b\nGP");
    }
}
