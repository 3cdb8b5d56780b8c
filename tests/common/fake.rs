//! A fake HTTP server on loopback for fault injection: it serves any body
//! with any status, hangs, drips one byte a second, resets mid-body,
//! answers garbage, or is down — and can be switched from one behaviour to
//! another while it runs (down, then back). Real sockets, real HTTP/1.1:
//! the client under test cannot tell it from a broken slurmrestd,
//! dcgm-exporter or Prometheus.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone)]
pub enum Behaviour {
    /// `status` with `body` (and its content type).
    Serve {
        status: u16,
        content_type: &'static str,
        body: Vec<u8>,
    },
    /// Accepts, reads the request, never answers.
    Hang,
    /// Sends the head, then the body one byte a second.
    Drip { body: Vec<u8> },
    /// Sends the head and half the body, then resets the connection.
    ResetMidBody { body: Vec<u8> },
    /// Bytes that are not HTTP at all.
    Garbage(Vec<u8>),
    /// Refuses connections (closes them at once, as a dead port would).
    Down,
    /// `200` with `prefix`, then `unit` again and again, never ending (no
    /// length; up to 8 GiB, or until the client goes): spaces a parser
    /// skips, or a series a parser keeps.
    Endless {
        content_type: &'static str,
        prefix: &'static str,
        unit: &'static str,
    },
    /// By path: the first route whose prefix the request's path starts
    /// with; `Serve 404` when none does.
    Routes(Vec<(&'static str, Behaviour)>),
    /// A Prometheus text page whose `{n}` is a counter rising `per_second`
    /// since `since`: an exporter whose counters move (an NVLink storm).
    Rising {
        text: &'static str,
        per_second: u64,
        since: std::time::Instant,
    },
}

impl Behaviour {
    pub fn text(status: u16, body: impl Into<String>) -> Behaviour {
        Behaviour::Serve {
            status,
            content_type: "text/plain; version=0.0.4",
            body: body.into().into_bytes(),
        }
    }

    pub fn json(status: u16, body: impl Into<String>) -> Behaviour {
        Behaviour::Serve {
            status,
            content_type: "application/json",
            body: body.into().into_bytes(),
        }
    }
}

pub struct Fake {
    pub port: u16,
    behaviour: Arc<Mutex<Behaviour>>,
}

impl Fake {
    pub fn start(b: Behaviour) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let behaviour = Arc::new(Mutex::new(b));
        let shared = behaviour.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(s) = stream else { continue };
                let b = shared.lock().map(|b| b.clone()).unwrap_or(Behaviour::Down);
                std::thread::spawn(move || handle(s, b));
            }
        });
        Fake { port, behaviour }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// From the next connection on, behave like this.
    pub fn set(&self, b: Behaviour) {
        if let Ok(mut cur) = self.behaviour.lock() {
            *cur = b;
        }
    }
}

/// Reads the request head; returns its path.
fn read_request(s: &mut TcpStream) -> String {
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = [0u8; 8192];
    let mut got = Vec::new();
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got)
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("/")
        .to_string()
}

fn head(status: u16, content_type: &str, len: usize) -> String {
    format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
    )
}

fn handle(mut s: TcpStream, b: Behaviour) {
    if let Behaviour::Routes(routes) = b {
        let path = read_request(&mut s);
        let route = routes
            .into_iter()
            .find(|(prefix, _)| path.starts_with(prefix))
            .map(|(_, b)| b)
            .unwrap_or(Behaviour::text(404, "no such path"));
        return respond_read(s, route);
    }
    read_then(s, b, true);
}

/// Serves `b` on a connection whose request was read already.
fn respond_read(s: TcpStream, b: Behaviour) {
    read_then(s, b, false);
}

fn read_then(mut s: TcpStream, b: Behaviour, read: bool) {
    let read_request = |s: &mut TcpStream| {
        if read {
            read_request(s);
        }
    };
    match b {
        Behaviour::Down | Behaviour::Routes(_) => {}
        Behaviour::Hang => {
            read_request(&mut s);
            std::thread::sleep(Duration::from_secs(3600));
        }
        Behaviour::Serve {
            status,
            content_type,
            body,
        } => {
            read_request(&mut s);
            let _ = s.write_all(head(status, content_type, body.len()).as_bytes());
            let _ = s.write_all(&body);
        }
        Behaviour::Rising {
            text,
            per_second,
            since,
        } => {
            read_request(&mut s);
            let n = since.elapsed().as_secs() * per_second;
            let body = text.replace("{n}", &n.to_string());
            let ct = "text/plain; version=0.0.4";
            let _ = s.write_all(head(200, ct, body.len()).as_bytes());
            let _ = s.write_all(body.as_bytes());
        }
        Behaviour::Drip { body } => {
            read_request(&mut s);
            let _ = s.write_all(head(200, "text/plain", body.len()).as_bytes());
            for b in body {
                if s.write_all(&[b]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        Behaviour::ResetMidBody { body } => {
            read_request(&mut s);
            let _ = s.write_all(head(200, "text/plain", body.len()).as_bytes());
            let _ = s.write_all(&body[..body.len() / 2]);
            // SO_LINGER 0: close sends RST, not FIN.
            let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
        }
        Behaviour::Garbage(bytes) => {
            read_request(&mut s);
            let _ = s.write_all(&bytes);
        }
        Behaviour::Endless {
            content_type,
            prefix,
            unit,
        } => {
            read_request(&mut s);
            let head = format!(
                "HTTP/1.1 200 X\r\nContent-Type: {content_type}\r\nConnection: close\r\n\r\n{prefix}"
            );
            if s.write_all(head.as_bytes()).is_err() {
                return;
            }
            let chunk = unit.repeat(((1 << 20) / unit.len().max(1)).max(1));
            let chunk = chunk.as_bytes();
            for _ in 0..(8usize << 30) / chunk.len().max(1) {
                if s.write_all(chunk).is_err() {
                    return;
                }
            }
        }
    }
}

/// A TCP proxy on loopback to `port` that holds each connection `delay`
/// before it passes it on: the server behind it, answering slowly (a
/// loaded Prometheus). Returns the proxy's port.
#[allow(dead_code)]
pub fn slow_proxy(port: u16, delay: Duration) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let mine = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                let Ok(server) = TcpStream::connect(("127.0.0.1", port)) else {
                    return;
                };
                let pipe = |mut from: TcpStream, mut to: TcpStream| {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Write);
                    })
                };
                let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                    return;
                };
                let up = pipe(client, server);
                let down = pipe(s2, c2);
                let _ = up.join();
                let _ = down.join();
            });
        }
    });
    mine
}
