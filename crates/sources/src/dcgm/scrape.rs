//! Scraping node endpoints' `/metrics` (dcgm-exporter, nightshift agent):
//! concurrently with a bound, each with a timeout, and backing off from an
//! endpoint that keeps failing. A failed endpoint's last readings stay,
//! with their age.

use super::Reading;
use super::textformat;
use crate::SourceError;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Scrapes in flight at once.
const CONCURRENCY: usize = 32;

/// One round over every endpoint.
#[derive(Debug, Clone, Default)]
pub struct Round {
    pub readings: Vec<Reading>,
    /// Network ports (node exporters' infiniband collector).
    pub ports: Vec<super::ports::PortReading>,
    /// Endpoints scraped this round: answered (`None`) or failed.
    pub polled: Vec<(String, Option<SourceError>)>,
    /// (endpoint, note) about lines that did not parse: warnings, the
    /// endpoint's other readings stand.
    pub notes: Vec<(String, String)>,
}

pub use crate::http::{authority_of, host_of, http_error, status_error};

use crate::host::now;

/// What one endpoint's scrape held: GPU readings, network ports.
#[derive(Debug, Clone, Default)]
pub struct Scrape {
    pub readings: Vec<Reading>,
    pub ports: Vec<super::ports::PortReading>,
}

/// An endpoint's readings and the notes about lines that did not parse.
type Scraped = Result<(Scrape, Vec<String>), SourceError>;

async fn scrape_one(http: &reqwest::Client, url: &str, timeout: Duration) -> Scraped {
    let resp = http
        .get(url)
        .send()
        .await
        .map_err(|e| http_error(url, &e, timeout))?;
    let status = resp.status();
    if !status.is_success() {
        let body = crate::http::text(resp, url, timeout)
            .await
            .unwrap_or_default();
        return Err(status_error(url, status.as_u16(), &body));
    }
    let text = crate::http::text(resp, url, timeout).await?;
    // Parsing a big scrape is heavy: on a blocking thread, never on one of
    // the runtime's async workers (they also serve the UI's channels).
    let url2 = url.to_string();
    tokio::task::spawn_blocking(move || parse_scrape(&url2, &text))
        .await
        .map_err(|e| SourceError::Other(format!("{url}: the parse stopped: {e}")))?
}

/// A scrape's text into readings, and notes about what was odd.
fn parse_scrape(url: &str, text: &str) -> Scraped {
    let (samples, bad) = textformat::parse(text);
    let max = crate::limits::get().max_series_per_scrape;
    if samples.len() as u64 > max {
        return Err(SourceError::TooLarge {
            what: format!("{url}: {} series", samples.len()),
            limit: max,
            key: "limits.max_series_per_scrape",
        });
    }
    if samples.is_empty() && !bad.is_empty() {
        return Err(SourceError::Decode {
            what: url.to_string(),
            detail: format!(
                "not a Prometheus text scrape ({} bad lines, first: line {}: {})",
                bad.len(),
                bad[0].line,
                crate::text::one_line(&bad[0].message, 120)
            ),
        });
    }
    let mut notes: Vec<String> = bad
        .iter()
        .take(3)
        .map(|e| {
            format!(
                "line {}: {}",
                e.line,
                crate::text::one_line(&e.message, 120)
            )
        })
        .collect();
    if bad.len() > 3 {
        notes.push(format!("{} more lines did not parse", bad.len() - 3));
    }
    let time = now();
    let (readings, warnings) = super::readings_checked(&samples, &host_of(url), time);
    notes.extend(warnings);
    notes.extend(super::ports::port_notes(&samples, &authority_of(url)));
    let ports = super::ports::ports_from(&samples, &authority_of(url), time);
    Ok((Scrape { readings, ports }, notes))
}

/// Keeps each endpoint's last good readings and when to try it next.
pub struct Scraper {
    http: reqwest::Client,
    urls: Vec<String>,
    last: HashMap<String, Scrape>,
    retry_at: HashMap<String, (Instant, crate::retry::Retry)>,
    interval: Duration,
    timeout: Duration,
}

impl Scraper {
    pub fn new(
        urls: Vec<String>,
        interval: Duration,
        timeout: Duration,
    ) -> Result<Scraper, crate::error::StartError> {
        let http = crate::http::client_builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .map_err(|e| crate::error::StartError::Http(e.to_string()))?;
        Ok(Scraper {
            http,
            urls,
            last: HashMap::new(),
            retry_at: HashMap::new(),
            interval,
            timeout,
        })
    }

    /// Scrapes the endpoints that are due; returns every endpoint's newest
    /// readings (old ones for endpoints that failed) and this round's errors.
    pub async fn round(&mut self) -> Round {
        let now = Instant::now();
        let due: Vec<String> = self
            .urls
            .iter()
            .filter(|u| self.retry_at.get(*u).is_none_or(|(t, _)| *t <= now))
            .cloned()
            .collect();
        let http = &self.http;
        let timeout = self.timeout;
        let results: Vec<(String, Scraped)> = futures_util::stream::iter(due)
            .map(|u| async move {
                let r = scrape_one(http, &u, timeout).await;
                (u, r)
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        let mut polled = Vec::new();
        let mut notes_out = Vec::new();
        for (url, r) in results {
            match r {
                Ok((readings, notes)) => {
                    self.last.insert(url.clone(), readings);
                    self.retry_at.remove(&url);
                    notes_out.extend(notes.into_iter().map(|n| (url.clone(), n)));
                    polled.push((url, None));
                }
                Err(e) => {
                    // Doubling with jitter, to two minutes at most.
                    let interval = self.interval;
                    let (at, retry) = self.retry_at.entry(url.clone()).or_insert_with(|| {
                        (
                            Instant::now(),
                            crate::retry::Retry::new(interval, Duration::from_secs(120)),
                        )
                    });
                    *at = Instant::now() + retry.next_delay();
                    polled.push((url, Some(e)));
                }
            }
        }
        let mut readings: Vec<Reading> = self
            .last
            .values()
            .flat_map(|s| s.readings.iter().cloned())
            .collect();
        readings.sort_by(|a, b| a.host.cmp(&b.host).then(a.index.cmp(&b.index)));
        let mut ports: Vec<super::ports::PortReading> = self
            .last
            .values()
            .flat_map(|s| s.ports.iter().cloned())
            .collect();
        ports.sort_by(|a, b| {
            a.endpoint
                .cmp(&b.endpoint)
                .then(a.port.name().cmp(&b.port.name()))
        });
        Round {
            readings,
            ports,
            polled,
            notes: notes_out,
        }
    }
}
