//! What the one analysis remembers between snapshots: each GPU's last
//! error-counter reading (for rates), when each job began to show the
//! hung-collective signature (for sustained stalls), and how the jobs that
//! left the data ended. The console's analyst, `--replay --at`, the report
//! and the guard's previews feed it the same snapshots in the same order
//! and so read the same base: no surface computes its own.

use super::SiteParams;
use super::base::Base;
use super::health::EccBaseline;
use super::plan::Unusable;
use super::repeat::FaultLog;
use super::stall::StallHistory;
use super::xid::XidCatalog;
use crate::model::{Cluster, JobState, Timestamp};
use rustc_hash::FxHashMap;

/// How long a job that left the data is remembered by how it ended: the
/// events that name it are kept no longer (an incident's window).
const ENDED_KEEP_S: i64 = 24 * 3600;

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Memory {
    baseline: Option<EccBaseline>,
    stalls: StallHistory,
    /// The hardware faults of the snapshots seen, each once (a source
    /// keeps its newest events only): the repeat-offender rule counts them
    /// all, the same in a console open all night and in `--replay --at`.
    faults: FaultLog,
    /// Jobs seen in an end state (failed, cancelled, completed): the state
    /// and when it was first seen so.
    ended: FxHashMap<String, (JobState, Timestamp)>,
    /// The faults nightshift was used to act on here (the audit log's
    /// intents), set by the console's analyst as the log grows: typed
    /// data beside the snapshots, read into the base's history. Not
    /// recorded: the audit log is read again where the memory is used.
    #[serde(skip)]
    audited: std::sync::Arc<Vec<crate::model::PastFault>>,
    /// The jobs last observed: one that is the same shared record has not
    /// changed its state, and is not looked at again (100,000 a snapshot
    /// at 10,000 nodes).
    #[serde(skip)]
    jobs: super::changed::Held<crate::model::Job>,
    /// The events concluded from the readings (a node down that lasts, a
    /// port down, an NVLink storm): one deriver for every source.
    #[serde(default)]
    derived: super::derive::Deriver,
}

fn ended(s: JobState) -> bool {
    matches!(
        s,
        JobState::Failed | JobState::Cancelled | JobState::Completed
    )
}

impl Memory {
    /// Takes in the next snapshot. Every snapshot, analysed or not: the
    /// rates and the stalls' start do not depend on how often the analysis
    /// runs.
    pub fn observe(&mut self, c: &Cluster, site: &SiteParams) {
        if c.time < self.stalls.time {
            // A clock that went back (a new source, a jump back in a
            // replay): what was remembered is of another timeline. What
            // the audit log says stays: it is not the snapshots'.
            let audited = std::mem::take(&mut self.audited);
            *self = Memory::default();
            self.audited = audited;
        }
        self.stalls.observe(c, site);
        self.faults.add(c);
        self.faults
            .forget_before(c.time.saturating_sub(site.repeat_offender.window_s));
        match &mut self.baseline {
            Some(b) => b.observe(c),
            None => self.baseline = Some(EccBaseline::of(c)),
        }
        self.derived.observe(c, self.baseline.as_ref(), site);
        let ended_jobs = &mut self.ended;
        self.jobs.update(&c.jobs, |i| {
            let Some(j) = c.jobs.get(i).filter(|j| ended(j.state)) else {
                return;
            };
            match ended_jobs.get_mut(j.id.as_str()) {
                // A job requeued after it failed may end again otherwise.
                Some(e) if e.0 != j.state => *e = (j.state, c.time),
                Some(_) => {}
                None => {
                    ended_jobs.insert(j.id.clone(), (j.state, c.time));
                }
            }
        });
        let oldest = c.time.saturating_sub(ENDED_KEEP_S);
        if self.ended.len() > 1024 && self.ended.values().any(|(_, t)| *t < oldest) {
            self.ended.retain(|_, (_, t)| *t >= oldest);
        }
    }

    /// The base of `c`, the last snapshot observed.
    pub fn base(&self, c: &Cluster, site: &SiteParams, cat: &XidCatalog) -> Base {
        let c = self.with_history(c);
        let mut b = Base::compute_on(&c, self.baseline.as_ref(), site, cat, &self.stalls);
        self.recall_ended(&mut b.incidents);
        b
    }

    /// The incidents of the base of `c` (the last snapshot observed),
    /// without the rest of it: a post-mortem's look at 10,000 nodes planned
    /// 100,000 jobs for nothing.
    pub fn incidents(
        &self,
        c: &Cluster,
        site: &SiteParams,
        cat: &XidCatalog,
    ) -> Vec<super::incidents::Incident> {
        let c = self.with_history(c);
        let mut found =
            super::base::incidents_on(&c, self.baseline.as_ref(), site, cat, &self.stalls);
        self.recall_ended(&mut found);
        found
    }

    /// The nodes the base of `c` would hold unusable (what a plan of a
    /// what-if reads), without the rest of the analysis: a job's restore
    /// estimate at its stop, where the report needs no more.
    pub fn unusable(&self, c: &Cluster, site: &SiteParams, cat: &XidCatalog) -> Unusable {
        let c = self.with_history(c);
        super::health::critical_nodes(&super::health::verdicts(
            &c,
            self.baseline.as_ref(),
            cat,
            site,
        ))
    }

    /// `c` with the faults remembered and the audit's in its history; the
    /// nodes and jobs are shared, not copied.
    fn with_history<'a>(&self, c: &'a Cluster) -> std::borrow::Cow<'a, Cluster> {
        let derived = self.derived.events();
        if self.faults.is_empty() && self.audited.is_empty() && derived.is_empty() {
            return std::borrow::Cow::Borrowed(c);
        }
        let mut whole = c.clone();
        whole.events.extend(derived.iter().cloned());
        whole.history.extend(self.faults.faults());
        whole.history.extend(self.audited.iter().cloned());
        std::borrow::Cow::Owned(whole)
    }

    /// The audit log's faults for this cluster (see `audited`); the same
    /// list again changes nothing.
    pub fn set_audited(&mut self, faults: std::sync::Arc<Vec<crate::model::PastFault>>) {
        self.audited = faults;
    }

    /// This memory without the error counters' readings (the health
    /// rates read as unknown) or the ended jobs (their incidents' jobs
    /// read as gone): small enough to keep one per job's stop, where only
    /// the job's loss is read.
    pub fn without_rates(&self) -> Memory {
        Memory {
            baseline: None,
            stalls: self.stalls.clone(),
            faults: self.faults.clone(),
            ended: FxHashMap::default(),
            audited: self.audited.clone(),
            // Without the ended jobs, no job is taken as already looked at.
            jobs: Default::default(),
            derived: self.derived.clone(),
        }
    }

    /// What of the site's parameters a memory depends on (the stall
    /// signature's thresholds, the repeat-offender window): a memory
    /// recorded with others is not taken for this site's.
    pub fn site_key(site: &SiteParams) -> String {
        format!(
            "stall {} {}; repeat window {}",
            site.stall_util_min, site.stall_occupancy_max, site.repeat_offender.window_s
        )
    }

    /// The events derived from the snapshots so far (see `derive`).
    pub fn derived_events(&self) -> &[crate::model::Event] {
        self.derived.events()
    }

    /// Every hardware fault seen, each once.
    pub fn fault_log(&self) -> &FaultLog {
        &self.faults
    }

    /// The stall history (what the console's stall chart reads).
    pub fn stalls(&self) -> &StallHistory {
        &self.stalls
    }

    /// How a job that left the data ended, if it was seen ending.
    pub fn ended_as(&self, id: &str) -> Option<JobState> {
        self.ended.get(id).map(|(s, _)| *s)
    }

    /// An incident's job that left the data is told by how it was seen to
    /// end ("running→failed"), the same in a console that watched it go
    /// and one that opened later on a recording, not "running→gone".
    fn recall_ended(&self, incidents: &mut [super::incidents::Incident]) {
        for i in incidents {
            for j in i.jobs.iter_mut().filter(|j| j.state_now.is_none()) {
                j.state_now = self.ended_as(&j.id);
            }
        }
    }
}

/// A snapshot and the memory of the snapshots up to it: what every
/// surface's answers for that moment are computed from.
#[derive(Debug, Clone, Default)]
pub struct Moment {
    pub cluster: Cluster,
    pub memory: Memory,
}

impl Moment {
    /// A snapshot with no earlier ones (a live one-shot command).
    pub fn alone(cluster: Cluster, site: &SiteParams) -> Moment {
        let mut memory = Memory::default();
        memory.observe(&cluster, site);
        Moment { cluster, memory }
    }

    /// The one analysis of this moment.
    pub fn base(&self, site: &SiteParams, cat: &XidCatalog) -> Base {
        self.memory.base(&self.cluster, site, cat)
    }
}

impl Base {
    /// The base of a snapshot (and the one before it, for rates) through
    /// a memory of them, as every surface's is: what is derived from
    /// readings (a node down, a port down) is there too. Stalls are found
    /// by their hardware Xid only, and storms not at all: a sustained
    /// signature needs the history a watching process has.
    pub fn compute(
        c: &Cluster,
        prev: Option<&Cluster>,
        site: &SiteParams,
        cat: &XidCatalog,
    ) -> Base {
        let mut m = Memory::default();
        if let Some(p) = prev {
            m.observe(p, site);
        }
        m.observe(c, site);
        m.base(c, site, cat)
    }
}

/// The base of one snapshot alone, with no earlier ones (a live one-shot
/// command): the memory of that snapshot only.
pub fn base_of_one(c: &Cluster, site: &SiteParams, cat: &XidCatalog) -> Base {
    let mut m = Memory::default();
    m.observe(c, site);
    m.base(c, site, cat)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{Sim, SimConfig};

    fn xid13_job_now(b: &Base) -> Option<JobState> {
        let i = b
            .incidents
            .iter()
            .find(|i| i.label == "XID 13")
            .expect("the Xid 13 incident");
        i.jobs[0].state_now
    }

    /// "running→failed" in a console that watched the job fail, and the
    /// same once the job has left the data — never "running→gone" in one
    /// console and "failed" in another (issue 39).
    #[test]
    fn a_job_that_left_after_failing_is_told_as_failed() {
        let (site, cat) = (SiteParams::default(), XidCatalog::default());
        let mut s = Sim::new(SimConfig::default()).expect("sim");
        s.advance(45);
        let failed = s.snapshot();
        let mut m = Memory::default();
        m.observe(&failed, &site);
        assert_eq!(
            xid13_job_now(&m.base(&failed, &site, &cat)),
            Some(JobState::Failed)
        );
        // The scheduler forgets it (Slurm's MinJobAge).
        let mut later = failed.clone();
        later.time += 600;
        let id = {
            let b = m.base(&failed, &site, &cat);
            let i = b
                .incidents
                .iter()
                .find(|i| i.label == "XID 13")
                .expect("Xid 13");
            i.jobs[0].id.clone()
        };
        later.jobs.retain(|j| j.id != id);
        m.observe(&later, &site);
        assert_eq!(
            xid13_job_now(&m.base(&later, &site, &cat)),
            Some(JobState::Failed)
        );
        // A process that never saw it end cannot say how it ended.
        assert_eq!(xid13_job_now(&base_of_one(&later, &site, &cat)), None);
    }

    /// The counters' readings kept in place give the rates the analyst's
    /// copy-per-snapshot gave.
    #[test]
    fn rates_kept_in_place_are_the_rates_of_advancing() {
        let site = SiteParams::default();
        let mut s = Sim::new(SimConfig::default()).expect("sim");
        let first = s.snapshot();
        let mut copied = EccBaseline::of(&first);
        let mut m = Memory::default();
        m.observe(&first, &site);
        // Through the NVLink storm (about 15 minutes in).
        for _ in 0..100 {
            s.advance(15);
            let c = s.snapshot();
            copied = EccBaseline::advance(Some(&copied), &c);
            m.observe(&c, &site);
            let held = m.baseline.as_ref().expect("baseline");
            crate::engine::health::assert_same_rates(held, &copied, &c);
        }
        // Some GPU had a rate: the comparison compared something.
        let c = s.snapshot();
        let held = m.baseline.as_ref().expect("baseline");
        assert!(c.nodes.iter().any(|n| n.gpus.iter().any(|g| {
            held.rates(&n.name, g.index)
                .sbe_per_hour
                .is_some_and(|r| r > 0.0)
                || held
                    .rates(&n.name, g.index)
                    .nvlink_per_hour
                    .is_some_and(|r| r > 0.0)
        })));
    }

    /// A clock that goes back (a jump back in a replay) starts over: no
    /// stall or rate carried from another timeline.
    #[test]
    fn a_clock_that_goes_back_forgets() {
        let site = SiteParams::default();
        let mut s = Sim::new(SimConfig::default()).expect("sim");
        s.advance(600);
        let late = s.snapshot();
        let mut m = Memory::default();
        m.observe(&late, &site);
        let mut early = late.clone();
        early.time -= 300;
        early.jobs.clear();
        m.observe(&early, &site);
        assert!(m.ended.is_empty());
        assert_eq!(m.stalls().time, early.time);
        assert_eq!(m.baseline.as_ref().map(|b| b.time), Some(early.time));
    }

    /// A post-mortem's look (the incidents alone) sees what the base of
    /// the same moment says, every 20 s through the sim's first half hour
    /// (its incidents opening, the jobs they name failing).
    #[test]
    fn the_incidents_alone_are_the_bases() {
        let (site, cat) = (SiteParams::default(), XidCatalog::default());
        let mut s = Sim::new(SimConfig::default()).expect("sim");
        let mut m = Memory::default();
        let mut told = 0;
        for _ in 0..90 {
            s.advance(20);
            let c = s.snapshot();
            m.observe(&c, &site);
            let alone = m.incidents(&c, &site, &cat);
            assert_eq!(alone, m.base(&c, &site, &cat).incidents, "at {}", c.time);
            told += alone.len();
        }
        assert!(told > 90, "the sim's incidents were looked at: {told}");
    }
}
