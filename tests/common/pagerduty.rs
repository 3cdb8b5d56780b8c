//! A stand-in for PagerDuty's Events API v2 (`POST /v2/enqueue`): nothing
//! outside this machine can be reached, so the tests page this instead.
//! It checks each event as PagerDuty documents it — `routing_key` (32
//! characters), `event_action` trigger/acknowledge/resolve, a `dedup_key`
//! (at most 255 characters), and for a trigger `payload.summary` (at most
//! 1024 characters), `payload.source`, `payload.severity`
//! (critical/error/warning/info) — answers 202 with `status: success` and
//! the key, or 400 with `errors[]` as PagerDuty does, and keeps every
//! event it accepted. `fail_next(n)` answers the next n with a 500.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Default)]
struct State {
    accepted: Vec<Value>,
    rejected: Vec<(Value, Vec<String>)>,
    fail_next: usize,
}

pub struct PagerDuty {
    pub port: u16,
    state: Arc<Mutex<State>>,
}

impl PagerDuty {
    pub fn start() -> PagerDuty {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let state = Arc::new(Mutex::new(State::default()));
        let s = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let s = s.clone();
                std::thread::spawn(move || serve(conn, &s));
            }
        });
        PagerDuty { port, state }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v2/enqueue", self.port)
    }

    /// The events accepted, in order.
    pub fn accepted(&self) -> Vec<Value> {
        self.state.lock().expect("state").accepted.clone()
    }

    /// The events refused, with why.
    pub fn rejected(&self) -> Vec<(Value, Vec<String>)> {
        self.state.lock().expect("state").rejected.clone()
    }

    pub fn fail_next(&self, n: usize) {
        self.state.lock().expect("state").fail_next = n;
    }
}

/// Why PagerDuty would refuse `e`.
pub fn invalid(e: &Value) -> Vec<String> {
    let mut why = Vec::new();
    let s = |v: &Value| v.as_str().map(str::to_string);
    match s(&e["routing_key"]) {
        Some(k) if k.len() == 32 => {}
        _ => why.push("routing_key must be the integration's 32-character key".into()),
    }
    let action = s(&e["event_action"]).unwrap_or_default();
    if !["trigger", "acknowledge", "resolve"].contains(&action.as_str()) {
        why.push(format!("event_action {action:?} is invalid"));
    }
    match s(&e["dedup_key"]) {
        Some(k) if !k.is_empty() && k.len() <= 255 => {}
        _ if action == "trigger" => {}
        _ => why.push("dedup_key is required to acknowledge or resolve".into()),
    }
    if action == "trigger" {
        let p = &e["payload"];
        match s(&p["summary"]) {
            Some(t) if !t.is_empty() && t.chars().count() <= 1024 => {}
            _ => why.push("payload.summary is required (at most 1024 characters)".into()),
        }
        if s(&p["source"]).is_none_or(|t| t.is_empty()) {
            why.push("payload.source is required".into());
        }
        let sev = s(&p["severity"]).unwrap_or_default();
        if !["critical", "error", "warning", "info"].contains(&sev.as_str()) {
            why.push(format!("payload.severity {sev:?} is invalid"));
        }
    }
    why
}

fn serve(mut conn: TcpStream, state: &Mutex<State>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let (head_end, len) = loop {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..i]).to_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (i + 4, len);
        }
    };
    while got.len() < head_end + len {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let request_line = String::from_utf8_lossy(&got[..head_end])
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let body = got.get(head_end..).unwrap_or_default();
    let (status, answer) = answer(&request_line, body, state);
    let _ = write!(
        conn,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
        answer.len()
    );
}

fn answer(request_line: &str, body: &[u8], state: &Mutex<State>) -> (u16, String) {
    if !request_line.starts_with("POST /v2/enqueue ") {
        return (404, r#"{"status":"not found"}"#.into());
    }
    let mut st = state.lock().expect("state");
    if st.fail_next > 0 {
        st.fail_next -= 1;
        return (500, r#"{"status":"error","message":"internal"}"#.into());
    }
    let event: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return (
                400,
                serde_json::json!({"status": "invalid event", "message": "Event object is invalid", "errors": [e.to_string()]}).to_string(),
            );
        }
    };
    let why = invalid(&event);
    if !why.is_empty() {
        st.rejected.push((event, why.clone()));
        return (
            400,
            serde_json::json!({"status": "invalid event", "message": "Event object is invalid", "errors": why}).to_string(),
        );
    }
    let key = event["dedup_key"]
        .as_str()
        .unwrap_or("generated")
        .to_string();
    st.accepted.push(event);
    (
        202,
        serde_json::json!({"status": "success", "message": "Event processed", "dedup_key": key})
            .to_string(),
    )
}
