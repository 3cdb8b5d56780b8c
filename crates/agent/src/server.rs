//! The agent's HTTP side: `/metrics`, `/events?since=N`, `/healthz`, served
//! by hyper (already in the tree through reqwest) with bounds: at most
//! `MAX_CONNECTIONS` at once (more are closed at once), request heads of
//! at most `MAX_HEAD_BYTES` read within `HEAD_TIMEOUT`, one request per
//! connection, each connection done within `CONNECTION_TIMEOUT`.

use super::{EventLog, GpuReadout, to_metrics};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;

/// Connections served at once; more are closed as soon as accepted.
pub const MAX_CONNECTIONS: usize = 64;
/// The longest request head read.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Time to send the request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// Time for the whole exchange.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub listen: SocketAddr,
    pub interval: Duration,
    /// Serve readings from a file instead of NVML (no GPU needed): for
    /// trying the agent and for tests.
    pub recorded: Option<PathBuf>,
    pub host: String,
    /// The NVML library to load; else the system's libnvidia-ml.so.1.
    pub nvml_lib: Option<PathBuf>,
    /// Where sysfs is (`/sys`): the HCA ports under `class/infiniband`.
    pub sysfs: PathBuf,
}

#[derive(Debug, Default)]
struct State {
    readouts: Vec<GpuReadout>,
    /// Unix seconds of the last successful read.
    read_at: i64,
    error: Option<String>,
}

/// A recorded file: `{"gpus": [GpuReadout…], "events": [{"gpu", "kind", "xid"}]}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
struct Recorded {
    gpus: Vec<GpuReadout>,
    #[serde(default)]
    events: Vec<RecordedEvent>,
}

#[derive(Debug, Deserialize)]
struct RecordedEvent {
    gpu: u32,
    kind: String,
    xid: Option<u64>,
}

pub fn hostname() -> String {
    crate::host::name()
}

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Nvml(#[from] super::nvml::NvmlProblem),
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Recorded {
        path: std::path::PathBuf,
        source: serde_json::Error,
    },
    #[error("{0} poisoned")]
    Poisoned(&'static str),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
}

impl From<AgentError> for String {
    fn from(e: AgentError) -> String {
        e.to_string()
    }
}

/// Runs until killed. Fails at once, in one line, when NVML is missing.
pub async fn run(cfg: AgentConfig) -> Result<(), AgentError> {
    let state = Arc::new(Mutex::new(State::default()));
    let log = Arc::new(Mutex::new(EventLog::default()));
    match &cfg.recorded {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| AgentError::Read {
                path: path.clone(),
                source: e,
            })?;
            let rec: Recorded = serde_json::from_str(&text).map_err(|e| AgentError::Recorded {
                path: path.clone(),
                source: e,
            })?;
            let now = crate::host::now();
            let mut l = log.lock().map_err(|_| AgentError::Poisoned("event log"))?;
            for e in &rec.events {
                l.push(now, e.gpu, &e.kind, e.xid);
            }
            let mut s = state.lock().map_err(|_| AgentError::Poisoned("state"))?;
            s.readouts = rec.gpus;
            s.read_at = now;
        }
        None => {
            let nvml = Arc::new(super::nvml::init(cfg.nvml_lib.as_deref())?);
            let (n2, l2) = (nvml.clone(), log.clone());
            std::thread::spawn(move || {
                if let Err(e) = super::nvml::watch_events(&n2, &l2) {
                    tracing::error!("event watch stopped: {e}");
                }
            });
            let (st, l3, every) = (state.clone(), log.clone(), cfg.interval);
            std::thread::spawn(move || {
                loop {
                    let last = |gpu: u32| l3.lock().ok().and_then(|l| l.last_xid(gpu));
                    let result = super::nvml::read_all(&nvml, &last);
                    if let Ok(mut s) = st.lock() {
                        match result {
                            Ok(r) => {
                                s.readouts = r;
                                s.read_at = crate::host::now();
                                s.error = None;
                            }
                            Err(e) => s.error = Some(e.to_string()),
                        }
                    }
                    std::thread::sleep(every);
                }
            });
        }
    }
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|e| AgentError::Listen {
            addr: cfg.listen,
            source: e,
        })?;
    tracing::info!("agent listening on {}", cfg.listen);
    serve(listener, state, log, (cfg.host, Arc::new(cfg.sysfs))).await;
    Ok(())
}

/// Accepts and serves connections until the listener fails for good.
async fn serve(
    listener: TcpListener,
    state: Arc<Mutex<State>>,
    log: Arc<Mutex<EventLog>>,
    (host, sysfs): (String, Arc<PathBuf>),
) {
    use http_body_util::Full;
    use hyper::body::Bytes;
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (conn, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::warn!("{peer}: over {MAX_CONNECTIONS} connections, closed");
            drop(conn);
            continue;
        };
        let (state, log, host, sysfs) = (state.clone(), log.clone(), host.clone(), sysfs.clone());
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (status, ctype, body) = if req.method() == hyper::Method::GET {
                        let path = req
                            .uri()
                            .path_and_query()
                            .map_or("/", |p| p.as_str())
                            .to_string();
                        respond(&path, &state, &log, &host, &sysfs)
                    } else {
                        (405, "text/plain", "only GET\n".to_string())
                    };
                    let resp = hyper::Response::builder()
                        .status(status)
                        .header("Content-Type", ctype)
                        .body(Full::new(Bytes::from(body)));
                    async move { resp }
                });
            let io = hyper_util::rt::TokioIo::new(conn);
            let served = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .max_buf_size(MAX_HEAD_BYTES)
                .keep_alive(false)
                .serve_connection(io, service);
            match tokio::time::timeout(CONNECTION_TIMEOUT, served).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!("{peer}: {e}"),
                Err(_) => tracing::debug!("{peer}: connection over {CONNECTION_TIMEOUT:?}, closed"),
            }
            drop(permit);
        });
    }
}

fn respond(
    path: &str,
    state: &Mutex<State>,
    log: &Mutex<EventLog>,
    host: &str,
    sysfs: &std::path::Path,
) -> (u16, &'static str, String) {
    let (route, query) = path.split_once('?').unwrap_or((path, ""));
    match route {
        "/metrics" => match state.lock() {
            Ok(s) => (
                200,
                "text/plain; version=0.0.4",
                // The ports are read as asked: a few small files.
                to_metrics(host, &s.readouts)
                    + &super::fabric::to_metrics(host, &super::fabric::read_ports(sysfs)),
            ),
            Err(_) => (500, "text/plain", "state unavailable\n".into()),
        },
        "/events" => {
            let since = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("since="))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let events = log.lock().map(|l| l.since(since)).unwrap_or_default();
            let body: String = events
                .iter()
                .filter_map(|e| serde_json::to_string(e).ok())
                .map(|l| l + "\n")
                .collect();
            (200, "application/x-ndjson", body)
        }
        "/healthz" => match state.lock() {
            Ok(s) if s.error.is_none() => (
                200,
                "text/plain",
                format!("ok: {} GPUs, read at {}\n", s.readouts.len(), s.read_at),
            ),
            Ok(s) => (
                503,
                "text/plain",
                format!("{}\n", s.error.as_deref().unwrap_or("")),
            ),
            Err(_) => (500, "text/plain", "state unavailable\n".into()),
        },
        _ => (
            404,
            "text/plain",
            "try /metrics, /events?since=N, /healthz\n".into(),
        ),
    }
}
