//! A one-body HTTP server on loopback for the sources' async unit tests
//! (the fault-injection suite in tests/ has a fuller one).

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Serves `body` with status 200 to every request until the test ends;
/// returns the URL of `/metrics`.
pub async fn serve(body: String) -> String {
    let routes = Shared::default();
    if let Ok(mut r) = routes.lock() {
        r.fallback = Some(body);
    }
    format!("{}/metrics", serve_routes(routes).await)
}

/// What a routing test server answers, and what it was asked.
#[derive(Default)]
pub struct Routes {
    /// Path (query stripped, trailing `/` ignored) → JSON body; others 404.
    pub bodies: std::collections::HashMap<String, String>,
    /// Every request's path, in order.
    pub asked: Vec<String>,
    /// Path → HTTP status other than 200 for its body.
    pub status: std::collections::HashMap<String, u16>,
    /// The body for any other path; `None`: 404.
    pub fallback: Option<String>,
}

pub type Shared = std::sync::Arc<std::sync::Mutex<Routes>>;

/// Serves `routes` with status 200 (404 for unknown paths, unless a
/// fallback body is set) until the test
/// ends, logging each path asked; returns `http://127.0.0.1:PORT`.
pub async fn serve_routes(routes: Shared) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let routes = routes.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&got);
                let path = head
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("/")
                    .split('?')
                    .next()
                    .unwrap_or("/")
                    .trim_end_matches('/')
                    .to_string();
                let (body, code) = {
                    let Ok(mut r) = routes.lock() else { return };
                    r.asked.push(path.clone());
                    let body = r.bodies.get(&path).or(r.fallback.as_ref()).cloned();
                    (body, r.status.get(&path).copied())
                };
                let (status, body) = match (body, code) {
                    (Some(b), Some(c)) => (format!("{c} Status"), b),
                    (Some(b), None) => ("200 OK".to_string(), b),
                    (None, _) => ("404 Not Found".to_string(), String::new()),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(body.as_bytes()).await;
            });
        }
    });
    format!("http://127.0.0.1:{port}")
}
