//! The agent's HTTP side: `/metrics`, `/events?since=N`, `/healthz`.
//!
//! A minimal GET-only HTTP/1.1 responder on tokio (one request per
//! connection): three read-only routes do not justify a web framework in
//! the console's dependency tree.

use super::{EventLog, GpuReadout, to_metrics};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub listen: SocketAddr,
    pub interval: Duration,
    /// Serve readings from a file instead of NVML (no GPU needed): for
    /// trying the agent and for tests.
    pub recorded: Option<PathBuf>,
    pub host: String,
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

/// Runs until killed. Fails at once, in one line, when NVML is missing.
pub async fn run(cfg: AgentConfig) -> Result<(), String> {
    let state = Arc::new(Mutex::new(State::default()));
    let log = Arc::new(Mutex::new(EventLog::default()));
    match &cfg.recorded {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let rec: Recorded =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            let now = crate::host::now();
            let mut l = log.lock().map_err(|_| "event log poisoned")?;
            for e in &rec.events {
                l.push(now, e.gpu, &e.kind, e.xid);
            }
            let mut s = state.lock().map_err(|_| "state poisoned")?;
            s.readouts = rec.gpus;
            s.read_at = now;
        }
        None => {
            let nvml = Arc::new(super::nvml::init()?);
            let (n2, l2) = (nvml.clone(), log.clone());
            std::thread::spawn(move || {
                if let Err(e) = super::nvml::watch_events(&n2, &l2) {
                    tracing::error!("event watch stopped: {e}");
                }
            });
            let (st, l3, every) = (state.clone(), log.clone(), cfg.interval);
            std::thread::spawn(move || {
                loop {
                    let last = |gpu: u32| {
                        l3.lock().ok().and_then(|l| {
                            l.since(0)
                                .iter()
                                .rev()
                                .find(|e| e.gpu == gpu && e.kind == "xid")
                                .and_then(|e| e.xid)
                        })
                    };
                    let result = super::nvml::read_all(&nvml, &last);
                    if let Ok(mut s) = st.lock() {
                        match result {
                            Ok(r) => {
                                s.readouts = r;
                                s.read_at = crate::host::now();
                                s.error = None;
                            }
                            Err(e) => s.error = Some(e),
                        }
                    }
                    std::thread::sleep(every);
                }
            });
        }
    }
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", cfg.listen))?;
    tracing::info!("agent listening on {}", cfg.listen);
    loop {
        let (mut conn, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("accept: {e}");
                continue;
            }
        };
        let (state, log, host) = (state.clone(), log.clone(), cfg.host.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 8192];
            let mut n = 0;
            while n < buf.len() {
                match tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf[n..])).await {
                    Ok(Ok(0)) | Err(_) | Ok(Err(_)) => break,
                    Ok(Ok(k)) => n += k,
                }
                if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            let req = String::from_utf8_lossy(&buf[..n]);
            let path = req
                .lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .unwrap_or("/")
                .to_string();
            let (status, ctype, body) = respond(&path, &state, &log, &host);
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes()).await;
            let _ = conn.write_all(body.as_bytes()).await;
        });
    }
}

fn respond(
    path: &str,
    state: &Mutex<State>,
    log: &Mutex<EventLog>,
    host: &str,
) -> (&'static str, &'static str, String) {
    let (route, query) = path.split_once('?').unwrap_or((path, ""));
    match route {
        "/metrics" => match state.lock() {
            Ok(s) => (
                "200 OK",
                "text/plain; version=0.0.4",
                to_metrics(host, &s.readouts),
            ),
            Err(_) => (
                "500 Internal Server Error",
                "text/plain",
                "state unavailable\n".into(),
            ),
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
            ("200 OK", "application/x-ndjson", body)
        }
        "/healthz" => match state.lock() {
            Ok(s) if s.error.is_none() => (
                "200 OK",
                "text/plain",
                format!("ok: {} GPUs, read at {}\n", s.readouts.len(), s.read_at),
            ),
            Ok(s) => (
                "503 Service Unavailable",
                "text/plain",
                format!("{}\n", s.error.as_deref().unwrap_or("")),
            ),
            Err(_) => (
                "500 Internal Server Error",
                "text/plain",
                "state unavailable\n".into(),
            ),
        },
        _ => (
            "404 Not Found",
            "text/plain",
            "try /metrics, /events?since=N, /healthz\n".into(),
        ),
    }
}
