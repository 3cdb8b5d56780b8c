//! Scraping node endpoints' `/metrics` (dcgm-exporter, nightshift agent):
//! concurrently with a bound, each with a timeout, and backing off from an
//! endpoint that keeps failing. A failed endpoint's last readings stay,
//! with their age.

use super::Reading;
use super::textformat;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Scrapes in flight at once.
const CONCURRENCY: usize = 32;

/// One round over every endpoint.
#[derive(Debug, Clone, Default)]
pub struct Round {
    pub readings: Vec<Reading>,
    /// (endpoint, what went wrong), including lines that did not parse.
    pub errors: Vec<(String, String)>,
}

/// The host name a URL points at, for series without a host label.
pub fn host_of(url: &str) -> String {
    let rest = url.split("://").nth(1).unwrap_or(url);
    rest.split(['/', ':']).next().unwrap_or(rest).to_string()
}

pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// An endpoint's readings and the notes about lines that did not parse.
type Scraped = Result<(Vec<Reading>, Vec<String>), String>;

async fn scrape_one(http: &reqwest::Client, url: &str) -> Scraped {
    let resp = http
        .get(url)
        .send()
        .await
        .map_err(|e| format!("cannot reach {url}: {e}"))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(format!("{url}: HTTP {}", status.as_u16()));
    }
    let text = resp
        .text()
        .await
        .map_err(|e| format!("{url}: reading the scrape failed: {e}"))?;
    let (samples, bad) = textformat::parse(&text);
    if samples.is_empty() && !bad.is_empty() {
        return Err(format!(
            "{url}: not a Prometheus text scrape ({} bad lines, first: line {}: {})",
            bad.len(),
            bad[0].line,
            bad[0].message
        ));
    }
    let notes = bad
        .iter()
        .take(3)
        .map(|e| format!("{url}: line {}: {}", e.line, e.message))
        .collect();
    Ok((super::readings(&samples, &host_of(url), now()), notes))
}

/// Keeps each endpoint's last good readings and when to try it next.
pub struct Scraper {
    http: reqwest::Client,
    urls: Vec<String>,
    last: HashMap<String, Vec<Reading>>,
    retry_at: HashMap<String, (Instant, Duration)>,
    interval: Duration,
}

impl Scraper {
    pub fn new(
        urls: Vec<String>,
        interval: Duration,
        timeout: Duration,
    ) -> Result<Scraper, String> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Scraper {
            http,
            urls,
            last: HashMap::new(),
            retry_at: HashMap::new(),
            interval,
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
        let results: Vec<(String, Scraped)> = futures_util::stream::iter(due)
            .map(|u| async move {
                let r = scrape_one(http, &u).await;
                (u, r)
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        let mut errors = Vec::new();
        for (url, r) in results {
            match r {
                Ok((readings, notes)) => {
                    self.last.insert(url.clone(), readings);
                    self.retry_at.remove(&url);
                    errors.extend(notes.into_iter().map(|n| (url.clone(), n)));
                }
                Err(e) => {
                    let backoff = self.retry_at.get(&url).map_or(self.interval, |(_, b)| {
                        (*b * 2).min(Duration::from_secs(120))
                    });
                    self.retry_at
                        .insert(url.clone(), (Instant::now() + backoff, backoff));
                    errors.push((url, e));
                }
            }
        }
        let mut readings: Vec<Reading> = self.last.values().flatten().cloned().collect();
        readings.sort_by(|a, b| a.host.cmp(&b.host).then(a.index.cmp(&b.index)));
        Round { readings, errors }
    }
}
