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
                return Err(super::dcgm::scrape::http_error(
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
