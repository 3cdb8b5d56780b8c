//! Reading HTTP answers with a bound: every body is read in chunks and
//! refused past `limits.max_body_bytes` — for all the answers in flight
//! together, not for each (three endless answers read at once must not
//! hold three times the bound) — so a hostile or broken server cannot
//! fill memory (or the log, when it is an error page).

use super::SourceError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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

/// The body as text (lossy: a bad byte is not a reason to lose the rest).
pub async fn text(
    resp: reqwest::Response,
    what: &str,
    timeout: Duration,
) -> Result<String, SourceError> {
    text_reserved(resp, what, timeout).await.map(|(t, _)| t)
}

/// [`text`], with its share of the budget (see [`body_reserved`]).
pub async fn text_reserved(
    resp: reqwest::Response,
    what: &str,
    timeout: Duration,
) -> Result<(String, Reservation), SourceError> {
    let (b, held) = body_reserved(resp, what, timeout).await?;
    Ok((
        match String::from_utf8(b) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        },
        held,
    ))
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
            detail: crate::text::one_line(&e.to_string(), 200),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
