//! How often to ask slurmrestd, and for what: the cost-aware side of the
//! Slurm source. Pure bookkeeping, no I/O, so each rule is unit-tested.
//!
//! - `Cadence`: the refresh interval adapts to what a poll costs, so that
//!   slurmrestd spends at most `budget` of one core on nightshift. A poll's
//!   cost is the summed wall time of its requests: an upper bound on
//!   slurmrestd's CPU for them (it includes slurmctld's RPCs and transfer).
//! - `JobBook`: on 24.11 (REST v0.0.40 on) `GET /jobs/state/` says every
//!   job's id and state in a few bytes each; full records are fetched only
//!   for jobs whose state changed, and all of them on a slower cadence
//!   (pending reasons and start estimates change without a state change).

use super::wire;
use crate::error::Invalid;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Past this many changed jobs, one `GET /jobs` is cheaper than one
/// `GET /job/ID` each.
pub const MAX_SINGLE_FETCHES: usize = 32;

/// The refresh interval and why it is what it is, for the header.
#[derive(Debug, Clone, PartialEq)]
pub struct Cadence {
    /// The interval the config asks for.
    pub wanted: Duration,
    /// slurmrestd's time nightshift may use, as a fraction of one core.
    pub budget: f64,
    /// Smoothed cost of one poll, seconds of slurmrestd's time.
    cost_s: Option<f64>,
    /// The longest the budget may stretch the interval to, and why.
    ceiling_s: f64,
    ceiling_why: &'static str,
}

impl Cadence {
    pub fn new(wanted: Duration, budget: f64) -> Cadence {
        Cadence {
            wanted,
            budget,
            cost_s: None,
            ceiling_s: MAX_INTERVAL_S,
            ceiling_why: "to keep it under 2 minutes old",
        }
    }

    /// Never stretched past `max` (nor past two minutes): data older than
    /// that is refused by the guard, so the budget gives way.
    pub fn ceiling(mut self, max: Duration) -> Cadence {
        self.ceiling_s = max.as_secs_f64().min(MAX_INTERVAL_S);
        self.ceiling_why = "to keep the data young enough to act on";
        self
    }

    /// The interval the budget alone would ask for.
    fn needed(&self) -> f64 {
        match self.cost_s {
            Some(c) if self.budget > 0.0 => c / self.budget,
            _ => 0.0,
        }
    }

    /// Records what the last poll cost; a sudden jump counts at once, a
    /// drop is believed over a few polls.
    pub fn observe(&mut self, cost: Duration) {
        let c = cost.as_secs_f64();
        self.cost_s = Some(match self.cost_s {
            Some(prev) if c < prev => prev * 0.5 + c * 0.5,
            _ => c,
        });
    }

    /// The interval that keeps within the budget, never shorter than the
    /// one asked for.
    pub fn interval(&self) -> Duration {
        let wanted = self.wanted.as_secs_f64();
        Duration::from_secs_f64(wanted.max(self.needed().min(self.ceiling_s)))
    }

    /// Whether the budget, not the config, sets the interval.
    pub fn stretched(&self) -> bool {
        self.interval() > self.wanted
    }

    /// What is fetched how often, and why when the budget stretched it:
    /// `a poll every 11s: it costs slurmrestd 0.32s, budget 3% of a core`.
    pub fn describe(&self, what: &str) -> String {
        let every = crate::text::duration(self.interval().as_secs_f64().round() as i64);
        match self.cost_s {
            Some(c) if self.needed() > self.interval().as_secs_f64() + 0.5 => format!(
                "{what} every {every}: it costs slurmrestd {c:.2}s, over the budget of {} of a core, {}",
                percent(self.budget),
                self.ceiling_why
            ),
            Some(c) if self.stretched() => format!(
                "{what} every {every}: it costs slurmrestd {c:.2}s, budget {} of a core",
                percent(self.budget)
            ),
            _ => format!("{what} every {every}"),
        }
    }
}

/// `3%`, `1.5%`.
fn percent(f: f64) -> String {
    let p = f * 100.0;
    if (p - p.round()).abs() < 0.05 {
        format!("{:.0}%", p)
    } else {
        format!("{p:.1}%")
    }
}

/// The longest interval the budget may stretch to: past it the data would
/// be too old to act on, and the header says so through its age.
const MAX_INTERVAL_S: f64 = 120.0;

/// What to fetch of the jobs after a `jobs/state` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobPlan {
    /// Every record: the first poll, the slow cadence, or too much changed.
    Full,
    /// These jobs' records, by id.
    Some(Vec<String>),
    /// Nothing changed.
    Nothing,
}

/// The jobs as last fetched, and the states they were fetched at.
#[derive(Debug, Default)]
pub struct JobBook {
    /// Shared with the snapshot being assembled; copied only when a poll
    /// changes it while that one still holds it.
    records: std::sync::Arc<Vec<wire::Job>>,
    states: BTreeMap<String, String>,
    full_at: Option<Instant>,
}

/// `jobs/state`'s answer as id → state words (`RUNNING`, `PENDING,REQUEUED`).
pub fn states(value: &serde_json::Value) -> Result<BTreeMap<String, String>, Invalid> {
    let jobs = value
        .get("jobs")
        .and_then(serde_json::Value::as_array)
        .ok_or("the answer has no `jobs` list")?;
    let mut out = BTreeMap::new();
    for j in jobs {
        let id = match j.get("job_id") {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Number(n)) => n.to_string(),
            _ => continue,
        };
        let state = match j.get("state") {
            Some(serde_json::Value::Array(a)) => a
                .iter()
                .filter_map(serde_json::Value::as_str)
                .collect::<Vec<_>>()
                .join(","),
            Some(serde_json::Value::String(s)) => s.clone(),
            _ => String::new(),
        };
        out.insert(id, state);
    }
    Ok(out)
}

impl JobBook {
    pub fn records(&self) -> std::sync::Arc<Vec<wire::Job>> {
        self.records.clone()
    }

    /// What to fetch, given the fresh states.
    pub fn plan(
        &self,
        fresh: &BTreeMap<String, String>,
        now: Instant,
        full_every: Duration,
    ) -> JobPlan {
        match self.full_at {
            None => return JobPlan::Full,
            Some(t) if now.duration_since(t) >= full_every => return JobPlan::Full,
            Some(_) => {}
        }
        let mut changed: Vec<String> = fresh
            .iter()
            .filter(|(id, s)| self.states.get(*id) != Some(*s))
            .map(|(id, _)| id.clone())
            .collect();
        let gone = self.states.keys().filter(|id| !fresh.contains_key(*id));
        // An array task that changes also changes its array's pending
        // remainder (`12_[3-9]`), which has no id of its own here: all.
        if changed.len() > MAX_SINGLE_FETCHES || changed.iter().any(|id| id.contains('_')) {
            return JobPlan::Full;
        }
        if changed.is_empty() && gone.clone().next().is_none() {
            return JobPlan::Nothing;
        }
        changed.sort();
        JobPlan::Some(changed)
    }

    /// Every record, fetched at `now` while the states were `fresh`.
    pub fn replace_all(
        &mut self,
        records: Vec<wire::Job>,
        fresh: BTreeMap<String, String>,
        now: Instant,
    ) {
        self.records = std::sync::Arc::new(records);
        self.states = fresh;
        self.full_at = Some(now);
    }

    /// Some records re-fetched: each replaces the record with its id;
    /// jobs Slurm no longer lists are dropped.
    pub fn update(&mut self, fetched: Vec<wire::Job>, fresh: BTreeMap<String, String>) {
        let records = std::sync::Arc::make_mut(&mut self.records);
        for f in fetched {
            let id = super::map::job_id(&f);
            match records
                .iter_mut()
                .find(|r| id.is_some() && super::map::job_id(r) == id)
            {
                Some(r) => *r = f,
                None => records.push(f),
            }
        }
        records.retain(|r| match super::map::job_id(r) {
            // Plain ids are in jobs/state while Slurm keeps them.
            Some(id) if !id.contains('_') => fresh.contains_key(&id),
            _ => true,
        });
        self.states = fresh;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    fn job(id: i64, state: &str) -> wire::Job {
        serde_json::from_value(serde_json::json!({"job_id": id, "job_state": [state]}))
            .expect("job")
    }

    #[test]
    fn cadence_stretches_to_the_budget_and_says_why() {
        let mut c = Cadence::new(Duration::from_secs(2), 0.03);
        assert_eq!(c.interval(), Duration::from_secs(2));
        assert_eq!(c.describe("a poll"), "a poll every 2s");
        c.observe(Duration::from_millis(30));
        assert_eq!(
            c.interval(),
            Duration::from_secs(2),
            "1 s would do: 2 s asked"
        );
        assert!(!c.stretched());
        c.observe(Duration::from_millis(320));
        let i = c.interval().as_secs_f64();
        assert!((i - 0.32 / 0.03).abs() < 1e-6, "{i}");
        assert_eq!(
            c.describe("a poll"),
            "a poll every 11s: it costs slurmrestd 0.32s, budget 3% of a core"
        );
        let half = Cadence::new(Duration::from_secs(30), 0.015);
        assert_eq!(percent(half.budget), "1.5%");
        // A cheaper poll is believed gradually.
        c.observe(Duration::from_millis(20));
        assert!((c.interval().as_secs_f64() - 0.17 / 0.03).abs() < 1e-6);
        // Never past the ceiling, however slow; a longer interval asked
        // for stands.
        c.observe(Duration::from_secs(100));
        assert_eq!(c.interval(), Duration::from_secs_f64(MAX_INTERVAL_S));
        assert!(
            c.describe("all jobs")
                .ends_with("over the budget of 3% of a core, to keep it under 2 minutes old"),
            "{}",
            c.describe("all jobs")
        );
        // Capped where the guard would refuse the data: the budget gives way.
        let mut capped =
            Cadence::new(Duration::from_secs(2), 0.03).ceiling(Duration::from_secs(15));
        capped.observe(Duration::from_millis(1100));
        assert_eq!(capped.interval(), Duration::from_secs(15));
        assert_eq!(
            capped.describe("a poll"),
            "a poll every 15s: it costs slurmrestd 1.10s, over the budget of 3% of a core, \
             to keep the data young enough to act on"
        );
        let mut hour = Cadence::new(Duration::from_secs(3600), 0.03);
        hour.observe(Duration::from_secs(100));
        assert_eq!(hour.interval(), Duration::from_secs(3600));
    }

    #[test]
    fn job_states_read_from_the_wire() {
        let v = serde_json::json!({"jobs": [
            {"job_id": "1", "state": ["RUNNING"]},
            {"job_id": "3_0", "state": ["PENDING", "REQUEUED"]},
            {"job_id": 7, "state": "COMPLETED"},
            {"state": ["RUNNING"]}
        ]});
        assert_eq!(
            states(&v),
            Ok(st(&[
                ("1", "RUNNING"),
                ("3_0", "PENDING,REQUEUED"),
                ("7", "COMPLETED")
            ]))
        );
        assert!(states(&serde_json::json!({})).is_err());
    }

    #[test]
    fn only_changed_jobs_are_fetched_and_all_on_the_slow_cadence() {
        let t0 = Instant::now();
        let every = Duration::from_secs(30);
        let mut book = JobBook::default();
        let s1 = st(&[("1", "RUNNING"), ("2", "PENDING")]);
        assert_eq!(book.plan(&s1, t0, every), JobPlan::Full, "first poll");
        book.replace_all(vec![job(1, "RUNNING"), job(2, "PENDING")], s1.clone(), t0);
        let t1 = t0 + Duration::from_secs(2);
        assert_eq!(book.plan(&s1, t1, every), JobPlan::Nothing);
        // Job 2 started, job 3 arrived, job 1 left Slurm's memory.
        let s2 = st(&[("2", "RUNNING"), ("3", "PENDING")]);
        assert_eq!(
            book.plan(&s2, t1, every),
            JobPlan::Some(vec!["2".into(), "3".into()])
        );
        book.update(vec![job(2, "RUNNING"), job(3, "PENDING")], s2.clone());
        let ids: Vec<_> = book
            .records()
            .iter()
            .filter_map(super::super::map::job_id)
            .collect();
        assert_eq!(ids, ["2", "3"]);
        assert_eq!(book.records()[0].job_state.0, ["RUNNING"]);
        // A job that only left: nothing to fetch, but it goes.
        let s3 = st(&[("3", "PENDING")]);
        assert_eq!(book.plan(&s3, t1, every), JobPlan::Some(vec![]));
        // Array tasks and big changes: everything.
        let s4 = st(&[("3", "PENDING"), ("4_0", "RUNNING")]);
        assert_eq!(book.plan(&s4, t1, every), JobPlan::Full);
        let many: BTreeMap<String, String> = (0..=MAX_SINGLE_FETCHES)
            .map(|i| (format!("{}", 100 + i), "PENDING".to_string()))
            .collect();
        assert_eq!(book.plan(&many, t1, every), JobPlan::Full);
        // The slow cadence.
        assert_eq!(book.plan(&s2, t0 + every, every), JobPlan::Full);
    }
}
