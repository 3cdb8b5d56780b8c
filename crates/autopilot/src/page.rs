//! Paging a person when a policy cannot decide: through Alertmanager's
//! API v2 (`POST /api/v2/alerts`, re-sent while it fires, resolved with
//! `endsAt`) and PagerDuty's Events API v2 (`trigger` once per incident,
//! `resolve` with the same `dedup_key`). An incident pages once, and its
//! page resolves when the incident closes.

use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// `[paging]` in the configuration.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PagingFile {
    pub alertmanager: Option<AlertmanagerFile>,
    pub pagerduty: Option<PagerDutyFile>,
    /// How often a firing page is sent to Alertmanager again (`1m`): less
    /// than its `resolve_timeout` (5m by default).
    pub resend: Option<String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AlertmanagerFile {
    /// `http://alertmanager:9093`.
    pub url: String,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PagerDutyFile {
    /// The integration's routing key.
    pub routing_key: String,
    /// `https://events.pagerduty.com/v2/enqueue` unless given.
    pub url: Option<String>,
}

pub const PAGERDUTY_URL: &str = "https://events.pagerduty.com/v2/enqueue";

/// One decision a person must make.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Page {
    /// The incident's id: one page per incident.
    pub incident: String,
    pub cluster: String,
    pub node: String,
    pub policy: String,
    /// One line: what a person must decide, and why.
    pub summary: String,
}

impl Page {
    /// The one key both services dedup on.
    pub fn dedup_key(&self) -> String {
        format!("nightshift/{}/{}", self.cluster, self.incident)
    }
}

struct Open {
    page: Page,
    started: chrono::DateTime<chrono::Utc>,
    /// Alertmanager last took it (re-sent after `resend`).
    am_sent: Option<Instant>,
    /// PagerDuty took its trigger.
    pd_sent: bool,
}

/// The pages open now, and where they go.
pub struct Pager {
    file: PagingFile,
    resend: Duration,
    client: reqwest::Client,
    open: HashMap<String, Open>,
}

/// What became of a round's pages, a line each (for the operator's
/// messages and the log).
pub type News = Vec<String>;

impl Pager {
    pub fn new(file: PagingFile) -> Result<Pager, String> {
        let resend = match &file.resend {
            None => 60,
            Some(s) => crate::engine::units::parse_duration(s)
                .map_err(|e| format!("[paging] resend = {s:?}: {e}"))?,
        };
        let client = crate::sources::http::client_builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("paging: {e}"))?;
        Ok(Pager {
            file,
            resend: Duration::from_secs(resend.max(1)),
            client,
            open: HashMap::new(),
        })
    }

    /// Whether anywhere is configured to page.
    pub fn configured(&self) -> bool {
        self.file.alertmanager.is_some() || self.file.pagerduty.is_some()
    }

    /// The incidents paged now.
    pub fn open(&self) -> impl Iterator<Item = &Page> {
        self.open.values().map(|o| &o.page)
    }

    /// One round: `wanted` are this round's decisions for a person (an
    /// incident already paged is not paged again); `open_incidents` the
    /// incidents still open (a page whose incident closed resolves).
    pub async fn round(&mut self, wanted: Vec<Page>, open_incidents: &HashSet<String>) -> News {
        let mut news = Vec::new();
        for p in wanted {
            if self.open.contains_key(&p.incident) {
                continue;
            }
            news.push(format!("paged: {} ({})", p.summary, p.incident));
            self.open.insert(
                p.incident.clone(),
                Open {
                    page: p,
                    started: chrono::Utc::now(),
                    am_sent: None,
                    pd_sent: false,
                },
            );
        }
        let closed: Vec<String> = self
            .open
            .keys()
            .filter(|k| !open_incidents.contains(*k))
            .cloned()
            .collect();
        for k in closed {
            if let Some(o) = self.open.remove(&k) {
                news.extend(self.resolve(&o).await);
                news.push(format!("page resolved: {} closed", o.page.incident));
            }
        }
        let keys: Vec<String> = self.open.keys().cloned().collect();
        for k in keys {
            news.extend(self.fire(&k).await);
        }
        news
    }

    /// Sends `k`'s page where it is due: to Alertmanager when not sent
    /// within `resend`, to PagerDuty once.
    async fn fire(&mut self, k: &str) -> News {
        let mut news = Vec::new();
        let Some(o) = self.open.get(k) else {
            return news;
        };
        let (page, started) = (o.page.clone(), o.started);
        let am_due = o.am_sent.is_none_or(|t| t.elapsed() >= self.resend);
        let pd_due = !o.pd_sent;
        let mut am_ok = None;
        let mut pd_ok = None;
        if let (Some(am), true) = (&self.file.alertmanager, am_due) {
            let r = self.alertmanager(am, &page, started, None).await;
            if let Err(e) = &r {
                news.push(format!("paging Alertmanager failed (tried again): {e}"));
            }
            am_ok = Some(r.is_ok());
        }
        if let (Some(pd), true) = (&self.file.pagerduty, pd_due) {
            let r = self.pagerduty(pd, &page, "trigger").await;
            if let Err(e) = &r {
                news.push(format!("paging PagerDuty failed (tried again): {e}"));
            }
            pd_ok = Some(r.is_ok());
        }
        if let Some(o) = self.open.get_mut(k) {
            if am_ok == Some(true) {
                o.am_sent = Some(Instant::now());
            }
            if pd_ok == Some(true) {
                o.pd_sent = true;
            }
        }
        news
    }

    async fn resolve(&self, o: &Open) -> News {
        let mut news = Vec::new();
        if let Some(am) = &self.file.alertmanager
            && let Err(e) = self
                .alertmanager(am, &o.page, o.started, Some(chrono::Utc::now()))
                .await
        {
            news.push(format!("resolving in Alertmanager failed: {e}"));
        }
        if let Some(pd) = &self.file.pagerduty
            && o.pd_sent
            && let Err(e) = self.pagerduty(pd, &o.page, "resolve").await
        {
            news.push(format!("resolving in PagerDuty failed: {e}"));
        }
        news
    }

    async fn alertmanager(
        &self,
        am: &AlertmanagerFile,
        p: &Page,
        started: chrono::DateTime<chrono::Utc>,
        ended: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<(), String> {
        let url = format!("{}/api/v2/alerts", am.url.trim_end_matches('/'));
        let body = json!([alert_of(p, started, ended)]);
        self.post(&url, &body).await
    }

    async fn pagerduty(&self, pd: &PagerDutyFile, p: &Page, action: &str) -> Result<(), String> {
        let url = pd.url.as_deref().unwrap_or(PAGERDUTY_URL);
        self.post(url, &event_of(p, &pd.routing_key, action)).await
    }

    async fn post(&self, url: &str, body: &serde_json::Value) -> Result<(), String> {
        let r = self
            .client
            .post(url)
            .json(body)
            .send()
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        let status = r.status();
        if status.is_success() {
            return Ok(());
        }
        let text = crate::sources::http::text(r, "the paging answer", Duration::from_secs(5))
            .await
            .unwrap_or_default();
        let text: String = text.chars().take(300).collect();
        Err(format!(
            "{url}: HTTP {status}: {}",
            crate::text::sanitize(text.trim())
        ))
    }
}

/// The alert Alertmanager is sent: labels that name the incident (its
/// identity: the same labels are the same alert), the decision as its
/// summary.
pub fn alert_of(
    p: &Page,
    started: chrono::DateTime<chrono::Utc>,
    ended: Option<chrono::DateTime<chrono::Utc>>,
) -> serde_json::Value {
    let mut a = json!({
        "labels": {
            "alertname": "NightshiftDecision",
            "severity": "critical",
            "cluster": p.cluster,
            "incident": p.incident,
            "node": p.node,
            "policy": p.policy,
            "source": "nightshift",
        },
        "annotations": {
            "summary": p.summary,
            "dedup_key": p.dedup_key(),
        },
        "startsAt": started.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    });
    if let (Some(end), Some(obj)) = (ended, a.as_object_mut()) {
        obj.insert(
            "endsAt".into(),
            json!(end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        );
    }
    a
}

/// PagerDuty's Events v2 event: `trigger` with the payload, `resolve`
/// with the key alone.
pub fn event_of(p: &Page, routing_key: &str, action: &str) -> serde_json::Value {
    if action != "trigger" {
        return json!({
            "routing_key": routing_key,
            "event_action": action,
            "dedup_key": p.dedup_key(),
        });
    }
    // PagerDuty takes a summary of 1024 characters at most.
    let summary: String = p.summary.chars().take(1024).collect();
    json!({
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": p.dedup_key(),
        "payload": {
            "summary": summary,
            "source": p.node,
            "severity": "critical",
            "component": p.node,
            "group": p.cluster,
            "class": "nightshift-decision",
            "custom_details": {
                "incident": p.incident,
                "policy": p.policy,
            },
        },
    })
}
