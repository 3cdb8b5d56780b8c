//! Reading HTTP answers with a bound: every body is read in chunks and
//! refused past `limits.max_body_bytes`, so a hostile or broken server
//! cannot fill memory (or the log, when it is an error page).

use super::SourceError;
use std::time::Duration;

/// The body of `resp`, at most `limits.max_body_bytes`.
pub async fn body(
    mut resp: reqwest::Response,
    what: &str,
    timeout: Duration,
) -> Result<Vec<u8>, SourceError> {
    let limit = crate::limits::get().max_body_bytes;
    let too_large = || SourceError::TooLarge {
        what: what.to_string(),
        limit,
        key: "limits.max_body_bytes",
    };
    if resp.content_length().is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let mut out: Vec<u8> = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if out.len() as u64 + chunk.len() as u64 > limit {
                    return Err(too_large());
                }
                out.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(out),
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
