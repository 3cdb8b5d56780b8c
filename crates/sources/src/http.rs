//! Reading HTTP answers with a bound: every body is read in chunks and
//! refused past `limits.max_body_bytes` — for all the answers in flight
//! together, not for each (three endless answers read at once must not
//! hold three times the bound) — so a hostile or broken server cannot
//! fill memory (or the log, when it is an error page).

use super::SourceError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A builder for every HTTP client nightshift makes (slurmrestd,
/// Prometheus, dcgm-exporter): the one place that sees the TLS crypto
/// provider installed first. reqwest is built without one of its own
/// (`rustls-no-provider`) and panics without it; kube's client takes the
/// same process default. ring is the one provider in the binary.
pub fn client_builder() -> reqwest::ClientBuilder {
    // An error only says a provider is already installed: that one serves.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match no_system_roots() {
        None => reqwest::Client::builder(),
        // No CA bundle on this host (a minimal root, a container): plain
        // HTTP still works, and HTTPS says why it cannot (issue 63: every
        // client failed "builder error", http:// ones included).
        Some(why) => match no_roots_tls(why) {
            Some(tls) => reqwest::Client::builder().tls_backend_preconfigured(tls),
            None => reqwest::Client::builder(),
        },
    }
}

/// Why the system's CA certificates cannot be had, where they cannot
/// (reqwest's verifier loads them when a client is built, and fails the
/// build without them): found once, at the first client.
fn no_system_roots() -> Option<&'static str> {
    static WHY: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    WHY.get_or_init(|| {
        reqwest::Client::builder()
            .build()
            .err()
            .map(|e| crate::text::one_line(&reason(&e), 200))
    })
    .as_deref()
}

/// A TLS set-up for a host with no CA certificates: every certificate is
/// refused, with what was looked for and how to point at a bundle.
fn no_roots_tls(why: &str) -> Option<rustls::ClientConfig> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let verifier = NoRoots {
        why: format!(
            "no CA certificates on this host ({why}; looked at $SSL_CERT_FILE, $SSL_CERT_DIR and the system's bundle, /etc/ssl/certs/ca-certificates.crt and the like): point SSL_CERT_FILE at a PEM bundle to reach HTTPS sources"
        ),
        schemes: provider
            .signature_verification_algorithms
            .supported_schemes(),
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .dangerous()
        .with_custom_certificate_verifier(std::sync::Arc::new(verifier))
        .with_no_client_auth();
    Some(config)
}

/// Refuses every server certificate, saying there are no roots to check
/// it against.
#[derive(Debug)]
struct NoRoots {
    why: String,
    schemes: Vec<rustls::SignatureScheme>,
}

impl NoRoots {
    fn refused(&self) -> rustls::Error {
        rustls::Error::General(self.why.clone())
    }
}

impl rustls::client::danger::ServerCertVerifier for NoRoots {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Err(self.refused())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Err(self.refused())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Err(self.refused())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.schemes.clone()
    }
}

/// The bytes of every answer being read now, or held until it is parsed.
static IN_FLIGHT: AtomicU64 = AtomicU64::new(0);

/// A share of the process's budget for answers (`limits.max_body_bytes`
/// in all), given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    held: u64,
    pool: &'static AtomicU64,
}

impl Default for Reservation {
    fn default() -> Self {
        Reservation {
            held: 0,
            pool: &IN_FLIGHT,
        }
    }
}

impl Reservation {
    /// Takes `n` more bytes of the budget `limit`; false (and nothing
    /// taken) when the answers in flight would pass it together.
    fn grow(&mut self, n: u64, limit: u64) -> bool {
        let mut now = self.pool.load(Ordering::Relaxed);
        loop {
            if now.saturating_add(n) > limit {
                return false;
            }
            match self
                .pool
                .compare_exchange_weak(now, now + n, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.held += n;
                    return true;
                }
                Err(seen) => now = seen,
            }
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.pool.fetch_sub(self.held, Ordering::AcqRel);
    }
}

/// The body of `resp`: at most `limits.max_body_bytes`, counted with
/// every other answer in flight.
pub async fn body(
    resp: reqwest::Response,
    what: &str,
    timeout: Duration,
) -> Result<Vec<u8>, SourceError> {
    body_reserved(resp, what, timeout).await.map(|(b, _)| b)
}

/// [`body`], and its share of the budget, held as long as the caller
/// keeps it (through parsing, say).
pub async fn body_reserved(
    mut resp: reqwest::Response,
    what: &str,
    timeout: Duration,
) -> Result<(Vec<u8>, Reservation), SourceError> {
    let limit = crate::limits::get().max_body_bytes;
    let too_large = || SourceError::TooLarge {
        what: what.to_string(),
        limit,
        key: "limits.max_body_bytes",
    };
    if resp.content_length().is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    // The chunks as they came, joined once at the end: a buffer grown by
    // doubling would hold up to twice the bound (and the allocator keeps
    // what each copy leaves behind).
    let mut chunks: Vec<bytes::Bytes> = Vec::new();
    let mut len = 0u64;
    let mut held = Reservation::default();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                len += chunk.len() as u64;
                if len > limit {
                    return Err(too_large());
                }
                if !held.grow(chunk.len() as u64, limit) {
                    return Err(SourceError::TooLarge {
                        what: format!("{what} (with the other answers being read)"),
                        limit,
                        key: "limits.max_body_bytes",
                    });
                }
                chunks.push(chunk);
            }
            Ok(None) => {
                let mut out = Vec::with_capacity(len as usize);
                for c in chunks.drain(..) {
                    out.extend_from_slice(&c);
                }
                return Ok((out, held));
            }
            Err(e) => {
                return Err(http_error(
                    &format!("{what}: reading the answer"),
                    &e,
                    timeout,
                ));
            }
        }
    }
}

/// Why a streamed answer could not be had: the transfer (as [`body`]
/// says it), the parse (its error and the answer's first line), or the
/// parser's thread.
#[derive(Debug)]
pub enum StreamError<E> {
    Source(SourceError),
    Parse { error: E, start: String },
    Task(String),
}

/// The body of `resp` given to `parse` *as it streams in*: each chunk
/// goes to the parser on a blocking thread the moment it arrives, so the
/// answer's text is never held whole beside its parse (the parser bounds
/// what it keeps); the bytes read count against the process's budget for
/// answers in flight (`limits.max_body_bytes` for all of them together)
/// until the parse is done. A parser that stops early (bad input, a
/// bound passed) stops the reading.
pub async fn parse_streamed<T, E>(
    mut resp: reqwest::Response,
    what: &str,
    timeout: Duration,
    parse: impl FnOnce(&mut dyn std::io::Read) -> Result<T, E> + Send + 'static,
) -> Result<T, StreamError<E>>
where
    T: Send + 'static,
    E: Send + 'static,
{
    let limit = crate::limits::get().max_body_bytes;
    let too_large = |with_others: bool| {
        StreamError::Source(SourceError::TooLarge {
            what: if with_others {
                format!("{what} (with the other answers being read)")
            } else {
                what.to_string()
            },
            limit,
            key: "limits.max_body_bytes",
        })
    };
    if resp.content_length().is_some_and(|n| n > limit) {
        return Err(too_large(false));
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(4);
    let parser = tokio::task::spawn_blocking(move || {
        let mut reader = ChunkReader {
            rx,
            now: bytes::Bytes::new(),
            start: Vec::new(),
        };
        // serde_json reads a byte at a time: buffered, not a call each.
        let parsed = parse(&mut std::io::BufReader::with_capacity(
            64 * 1024,
            &mut reader,
        ));
        (parsed, reader.start)
    });
    let mut held = Reservation::default();
    let mut len = 0u64;
    let mut failed = None;
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                len += chunk.len() as u64;
                if len > limit {
                    failed = Some(too_large(false));
                    break;
                }
                if !held.grow(chunk.len() as u64, limit) {
                    failed = Some(too_large(true));
                    break;
                }
                // The parser stopped (bad input, a bound): its error says why.
                if tx.send(chunk).await.is_err() {
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => {
                failed = Some(StreamError::Source(http_error(
                    &format!("{what}: reading the answer"),
                    &e,
                    timeout,
                )));
                break;
            }
        }
    }
    drop(tx);
    let parsed = parser.await;
    drop(held);
    if let Some(f) = failed {
        return Err(f);
    }
    match parsed {
        Ok((Ok(v), _)) => Ok(v),
        Ok((Err(error), start)) => Err(StreamError::Parse {
            error,
            start: crate::text::one_line(&String::from_utf8_lossy(&start), 120),
        }),
        Err(e) => Err(StreamError::Task(e.to_string())),
    }
}

/// The chunks of an answer as one reader, for a parser on a blocking
/// thread; keeps the answer's first bytes for an error message.
struct ChunkReader {
    rx: tokio::sync::mpsc::Receiver<bytes::Bytes>,
    now: bytes::Bytes,
    start: Vec<u8>,
}

impl std::io::Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.now.is_empty() {
            match self.rx.blocking_recv() {
                Some(c) => {
                    if self.start.len() < 240 {
                        let take = (240 - self.start.len()).min(c.len());
                        self.start.extend_from_slice(&c[..take]);
                    }
                    self.now = c;
                }
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.now.len());
        buf[..n].copy_from_slice(&self.now[..n]);
        let _ = self.now.split_to(n);
        Ok(n)
    }
}

/// The body as text (lossy: a bad byte is not a reason to lose the rest).
pub async fn text(
    resp: reqwest::Response,
    what: &str,
    timeout: Duration,
) -> Result<String, SourceError> {
    let b = body(resp, what, timeout).await?;
    Ok(match String::from_utf8(b) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// A reqwest error as a source error.
pub fn http_error(what: &str, e: &reqwest::Error, timeout: Duration) -> SourceError {
    if e.is_timeout() {
        SourceError::Timeout {
            what: what.to_string(),
            secs: timeout.as_secs(),
        }
    } else {
        SourceError::Unreachable {
            what: what.to_string(),
            detail: crate::text::one_line(&reason(e), 300),
        }
    }
}

/// What went wrong with a request, causes included (a refused
/// connection, a certificate, TLS to a plain port), without the URL that
/// the caller names already: reqwest's own words alone say only "error
/// sending request".
pub fn reason(e: &reqwest::Error) -> String {
    let mut top = e.to_string();
    if let Some(url) = e.url() {
        top = top.replace(&format!(" for url ({url})"), "");
    }
    match std::error::Error::source(e) {
        Some(inner) => format!("{top}: {}", error_chain(inner)),
        None => top,
    }
}

/// An error and each of its causes, joined with ": ".
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

/// An HTTP status that is not success, as a source error.
pub fn status_error(what: &str, status: u16, body: &str) -> SourceError {
    let detail = crate::text::one_line(body, 200);
    match status {
        401 | 403 => SourceError::Auth {
            what: what.to_string(),
            status,
            detail,
        },
        404 => SourceError::NotFound {
            what: what.to_string(),
            detail: if detail.is_empty() {
                String::new()
            } else {
                format!(": {detail}")
            },
        },
        _ => SourceError::Api {
            what: what.to_string(),
            errors: vec![if detail.is_empty() {
                format!("HTTP {status}")
            } else {
                format!("HTTP {status}: {detail}")
            }],
        },
    }
}

/// The host name a URL points at, for series without a host label: the
/// `url` crate's reading (an IPv6 literal is `::1`, not `[`; issue 63).
pub fn host_of(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => u
            .host_str()
            .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string())
            .unwrap_or_default(),
        Err(_) => {
            let rest = url.split("://").nth(1).unwrap_or(url);
            rest.split(['/', ':']).next().unwrap_or(rest).to_string()
        }
    }
}

/// The `host:port` a URL points at (a node exporter's `instance`, as
/// Prometheus writes it: `[::1]:9100` for an IPv6 literal).
pub fn authority_of(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => {
            let host = u.host_str().unwrap_or_default();
            match u.port() {
                Some(p) => format!("{host}:{p}"),
                None => host.to_string(),
            }
        }
        Err(_) => {
            let rest = url.split("://").nth(1).unwrap_or(url);
            rest.split('/').next().unwrap_or(rest).to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hosts read by the `url` crate (issue 63: `http://[::1]:19443`
    /// named a node `[`).
    #[test]
    fn hosts_of_urls_are_read_as_urls() {
        assert_eq!(host_of("http://[::1]:19443/metrics"), "::1");
        assert_eq!(authority_of("http://[::1]:19443/metrics"), "[::1]:19443");
        assert_eq!(host_of("http://gpu01:9400/metrics"), "gpu01");
        assert_eq!(authority_of("http://gpu01:9400/metrics"), "gpu01:9400");
        assert_eq!(authority_of("https://gpu01/metrics"), "gpu01");
        assert_eq!(host_of("http://user@GPU01.example:9400/x"), "gpu01.example");
    }

    /// The budget is the process's: what one answer holds, another cannot
    /// take, and it comes back when dropped.
    #[test]
    fn answers_in_flight_share_one_budget() {
        static POOL: AtomicU64 = AtomicU64::new(0);
        let limit = 100;
        let mut a = Reservation {
            held: 0,
            pool: &POOL,
        };
        let mut b = Reservation {
            held: 0,
            pool: &POOL,
        };
        assert!(a.grow(60, limit));
        assert!(!b.grow(60, limit), "together past the bound");
        assert!(b.grow(40, limit));
        drop(a);
        assert!(b.grow(60, limit));
    }
}
