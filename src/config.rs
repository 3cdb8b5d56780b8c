//! Settings: defaults, overridden by the TOML file, overridden by flags.

use crate::cli::{GlobalArgs, SourceKind};
use crate::engine::xid::XidCatalog;
use crate::engine::{SiteParams, units};
use crate::sources::SourceConfig;
use crate::sources::sim::SimConfig;
use crate::sources::slurm::SlurmConfig;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod clusters;
mod engine;
mod error;
mod file;

pub use clusters::{ClusterFile, Selection};
pub use engine::EngineFile;
pub use error::ConfigError;

/// The TOML file. Every key is optional; see config/nightshift.example.toml.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub source: Option<String>,
    pub read_only: Option<bool>,
    pub log_file: Option<PathBuf>,
    #[serde(default)]
    pub ui: UiFile,
    #[serde(default)]
    pub sim: SimFile,
    #[serde(default)]
    pub engine: EngineFile,
    #[serde(default)]
    pub slurm: SlurmFile,
    #[serde(default)]
    pub kube: KubeFile,
    #[serde(default)]
    pub actions: ActionsFile,
    #[serde(default)]
    pub endpoints: EndpointsFile,
    #[serde(default)]
    pub limits: LimitsFile,
    #[serde(default)]
    pub topology: TopologyFile,
    #[serde(default)]
    pub validate: ValidateFile,
    /// `[[clusters]]`: the clusters one console may watch (`--all`), or
    /// one of them (`--context NAME`).
    #[serde(default)]
    pub clusters: Vec<ClusterFile>,
    /// `[[policy]]`: the autopilot's policies (issue 61).
    #[serde(default)]
    pub policy: Vec<crate::autopilot::policy::PolicyFile>,
    /// `[paging]`: where the autopilot pages a person.
    #[serde(default)]
    pub paging: crate::autopilot::page::PagingFile,
    /// The text it was read from: the policies' errors name their lines.
    #[serde(skip)]
    pub text: String,
}

/// `[validate]`: the check a node passes before it goes back to service.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidateFile {
    /// Run on the node by a shell; `{level}` is the diagnostics level
    /// (default `dcgmi diag -r {level} -j`).
    pub command: Option<String>,
    /// The longest a check may take, queueing included (default 15m).
    pub timeout: Option<String>,
    /// Where the check's output goes: a directory the node writes and
    /// nightshift reads (default: the system's temporary directory).
    pub output_dir: Option<PathBuf>,
    /// Kubernetes: the image of the check's Job (default DCGM's).
    pub image: Option<String>,
    /// Kubernetes: the check Job's namespace (default `default`).
    pub namespace: Option<String>,
}

impl ValidateFile {
    fn resolve(&self) -> Result<crate::sources::validate::ValidateSpec, ConfigError> {
        let mut v = crate::sources::validate::ValidateSpec::default();
        if let Some(c) = &self.command {
            if c.trim().is_empty() {
                return Err(ConfigError::Validate("command is empty".into()));
            }
            v.command = c.clone();
        }
        if let Some(t) = &self.timeout {
            let s = units::parse_duration(t)
                .map_err(|e| ConfigError::Validate(format!("timeout: {e}")))?;
            if s == 0 || s > 86_400 {
                return Err(ConfigError::Validate(format!(
                    "timeout {t:?}: from 1s to 24h"
                )));
            }
            v.timeout = Duration::from_secs(s);
        }
        if let Some(d) = &self.output_dir {
            v.output_dir = d.clone();
        }
        if let Some(i) = &self.image {
            v.image = i.clone();
        }
        if let Some(n) = &self.namespace {
            v.namespace = n.clone();
        }
        Ok(v)
    }
}

/// `[topology]`: failure domains neither the scheduler nor the node labels
/// say (a power feed, a rack, an NVLink domain):
/// `domains = [{ level = "power", name = "pdu-a", nodes = "gpu[01-04]" }]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyFile {
    #[serde(default)]
    pub domains: Vec<DomainFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DomainFile {
    pub level: String,
    pub name: String,
    /// A Slurm host list: `gpu[01-04],gpu07`.
    pub nodes: String,
}

impl TopologyFile {
    fn resolve(&self) -> Result<crate::sources::site_topology::SiteDomains, ConfigError> {
        let mut out = Vec::new();
        if self.domains.len() > MAX_TOPOLOGY_DOMAINS {
            return Err(ConfigError::Topology(format!(
                "{} domains: at most {MAX_TOPOLOGY_DOMAINS}",
                self.domains.len()
            )));
        }
        // A domain once; a node in one domain of a level (two racks for
        // one node is a typo, and would group it with both).
        let mut named = std::collections::HashSet::new();
        let mut level_of: std::collections::HashMap<(String, String), String> = Default::default();
        let mut entries = 0usize;
        for d in &self.domains {
            let nodes = crate::sources::slurm::hostlist::expand(&d.nodes).map_err(|e| {
                ConfigError::Topology(format!("{} {}: nodes {:?}: {e}", d.level, d.name, d.nodes))
            })?;
            if d.level.trim().is_empty() || d.name.trim().is_empty() || nodes.is_empty() {
                return Err(ConfigError::Topology(format!(
                    "{:?} {:?}: a domain needs a level, a name and nodes",
                    d.level, d.name
                )));
            }
            if !named.insert((d.level.clone(), d.name.clone())) {
                return Err(ConfigError::Topology(format!(
                    "{} {} is given twice",
                    d.level, d.name
                )));
            }
            entries += nodes.len();
            if entries > MAX_TOPOLOGY_NODES {
                return Err(ConfigError::Topology(format!(
                    "more than {MAX_TOPOLOGY_NODES} node entries in all"
                )));
            }
            for n in &nodes {
                if let Some(other) = level_of.insert((d.level.clone(), n.clone()), d.name.clone()) {
                    return Err(ConfigError::Topology(format!(
                        "{n} is in {} {other} and {} {}: a node is in one domain of a level",
                        d.level, d.level, d.name
                    )));
                }
            }
            out.push((crate::model::Domain::new(&d.level, &d.name), nodes));
        }
        Ok(crate::sources::site_topology::SiteDomains(out))
    }
}

/// The most `[topology]` domains, and node entries across them (a
/// million-node site fits; ten million names are a mistake, not a site).
pub const MAX_TOPOLOGY_DOMAINS: usize = 100_000;
pub const MAX_TOPOLOGY_NODES: usize = 1_000_000;

/// The fastest the sim may run: sim seconds per wall second.
pub const MAX_SPEED: f64 = 10_000.0;
/// The biggest simulated cluster.
pub const MAX_SIM_NODES: usize = 100_000;
pub const MAX_SIM_JOBS: usize = 1_000_000;
/// The longest a printing command may run the sim before answering.
pub const MAX_SIM_SECONDS: u64 = 30 * 86_400;

/// `[limits]`: bounds on what is accepted from the outside.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    pub max_body_bytes: Option<u64>,
    pub max_hosts_per_list: Option<u64>,
    pub max_gpus_per_node: Option<u32>,
    pub max_series_per_scrape: Option<u64>,
    pub max_answer_held_bytes: Option<u64>,
    pub discovery_timeout_s: Option<f64>,
    pub max_recording_line_bytes: Option<u64>,
}

impl LimitsFile {
    fn resolve(&self) -> Result<crate::limits::Limits, ConfigError> {
        let mut l = crate::limits::Limits::default();
        let positive = |v: u64, key: &'static str| {
            if v == 0 {
                Err(ConfigError::LimitZero(key))
            } else {
                Ok(v)
            }
        };
        if let Some(v) = self.max_body_bytes {
            l.max_body_bytes = positive(v, "max_body_bytes")?;
        }
        if let Some(v) = self.max_hosts_per_list {
            l.max_hosts_per_list = positive(v, "max_hosts_per_list")?;
        }
        if let Some(v) = self.max_gpus_per_node {
            l.max_gpus_per_node = positive(u64::from(v), "max_gpus_per_node")? as u32;
        }
        if let Some(v) = self.max_series_per_scrape {
            l.max_series_per_scrape = positive(v, "max_series_per_scrape")?;
        }
        if let Some(v) = self.max_answer_held_bytes {
            l.max_answer_held_bytes = positive(v, "max_answer_held_bytes")?;
        }
        if let Some(v) = self.discovery_timeout_s {
            l.discovery_timeout_s = seconds(v, "limits.discovery_timeout_s")?.as_secs_f64();
        }
        if let Some(v) = self.max_recording_line_bytes {
            l.max_recording_line_bytes = positive(v, "max_recording_line_bytes")?;
        }
        Ok(l)
    }
}

/// `[endpoints]`: node endpoints whose GPU health joins the scheduler's view.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointsFile {
    #[serde(default)]
    pub dcgm: Vec<String>,
    /// Prometheus node exporters (their infiniband collector).
    #[serde(default)]
    pub node_exporter: Vec<String>,
    pub prometheus: Option<String>,
    pub interval_s: Option<f64>,
    pub timeout_s: Option<f64>,
    /// Up to this many GPUs on the Prometheus server, every GPU's series
    /// each refresh; above, per-node aggregates and full series only for
    /// nodes with a problem and the nodes opened.
    pub prometheus_every_gpu_max: Option<u32>,
    /// Endpoint host name → scheduler node name.
    #[serde(default)]
    pub hosts: std::collections::BTreeMap<String, String>,
}

impl EndpointsFile {
    /// The endpoints, flags over the file; the fleet path's problem filter
    /// takes the engine's stall thresholds (it finds what the rule reads).
    fn resolve(
        &self,
        args: &GlobalArgs,
        site: &SiteParams,
    ) -> Result<crate::sources::endpoints::Endpoints, ConfigError> {
        let or_flags = |flags: &Vec<String>, file: &Vec<String>| {
            if flags.is_empty() { file } else { flags }.clone()
        };
        Ok(crate::sources::endpoints::Endpoints {
            dcgm: or_flags(&args.dcgm, &self.dcgm),
            node_exporter: or_flags(&args.node_exporter, &self.node_exporter),
            prometheus: args.prometheus.clone().or_else(|| self.prometheus.clone()),
            interval: match self.interval_s {
                Some(v) => seconds(v, "endpoints.interval_s")?,
                None => Duration::from_secs(10),
            },
            timeout: match self.timeout_s {
                Some(v) => seconds(v, "endpoints.timeout_s")?,
                None => Duration::from_secs(5),
            },
            hosts: crate::sources::dcgm::merge::HostMap(self.hosts.clone()),
            prometheus_every_gpu_max: args
                .prometheus_every_gpu_max
                .or(self.prometheus_every_gpu_max)
                .unwrap_or(crate::sources::endpoints::EVERY_GPU_MAX),
            stall_util_min: site.stall_util_min,
            stall_occupancy_max: site.stall_occupancy_max,
            fault_window_s: site.repeat_offender.window_s,
        })
    }
}

/// `[slurm]`: where slurmrestd is and who we are to it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmFile {
    pub url: Option<String>,
    pub user: Option<String>,
    pub token_file: Option<PathBuf>,
    pub interval_s: Option<f64>,
    pub timeout_s: Option<f64>,
    pub cluster_name: Option<String>,
    pub scontrol: Option<String>,
    pub slurm_conf: Option<PathBuf>,
    pub api_version: Option<String>,
    pub rest_budget: Option<f64>,
    pub full_jobs_interval_s: Option<f64>,
    pub checkpoint_signal: Option<String>,
}

/// `[slurm] checkpoint_signal`: a signal name as scancel takes it
/// (`SIGUSR1`, `USR2`, `SIGTERM`); `SIGUSR1` by default.
fn checkpoint_signal(v: Option<&str>) -> Result<String, ConfigError> {
    let Some(v) = v else {
        return Ok("SIGUSR1".into());
    };
    let name = v.trim().to_ascii_uppercase();
    let bare = name.strip_prefix("SIG").unwrap_or(&name);
    if bare.is_empty() || !bare.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(ConfigError::Signal(v.to_string()));
    }
    Ok(format!("SIG{bare}"))
}

/// `[kube]`: which cluster, as kubectl chooses it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeFile {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub namespace: Option<String>,
    pub cluster_name: Option<String>,
    pub evict_timeout_s: Option<f64>,
    pub request_timeout_s: Option<f64>,
}

fn kube_config(
    args: &GlobalArgs,
    file: &KubeFile,
    validate: &ValidateFile,
) -> Result<crate::sources::kube::KubeConfig, ConfigError> {
    let evict_timeout = match file.evict_timeout_s {
        Some(s) => seconds(s, "kube.evict_timeout_s")?,
        None => Duration::from_secs(30),
    };
    Ok(crate::sources::kube::KubeConfig {
        kubeconfig: args.kubeconfig.clone().or_else(|| file.kubeconfig.clone()),
        context: args.context.clone().or_else(|| file.context.clone()),
        namespace: args.namespace.clone().or_else(|| file.namespace.clone()),
        cluster_name: file.cluster_name.clone(),
        interval: Duration::from_secs(10),
        evict_timeout,
        request_timeout: match file.request_timeout_s {
            Some(s) => seconds(s, "kube.request_timeout_s")?,
            None => Duration::from_secs(30),
        },
        validate: validate.resolve()?,
    })
}

/// The longest token file read: a Slurm JWT is a few hundred bytes.
const TOKEN_MAX: u64 = 64 * 1024;

/// Reads the Slurm token file: a regular file only (a FIFO would block,
/// `/dev/zero` would fill memory: issue 59), never through a link, at
/// most [`TOKEN_MAX`] bytes.
fn read_token(path: &Path) -> Result<String, ConfigError> {
    let err = |e: std::io::Error| ConfigError::Token {
        path: path.to_path_buf(),
        source: e,
    };
    let bytes = crate::host::read_regular(path, TOKEN_MAX).map_err(err)?;
    let text =
        String::from_utf8(bytes).map_err(|_| err(std::io::Error::other("not UTF-8 text")))?;
    // Accept the file as `scontrol token` prints it, or the bare token.
    let t = text.trim();
    Ok(t.strip_prefix("SLURM_JWT=").unwrap_or(t).to_string())
}

/// `max_data_age`: the actions' data-age limit; polls never stretch past
/// half of it, so the guard never calls the data too old to act on.
fn slurm_config(
    args: &GlobalArgs,
    file: &SlurmFile,
    max_data_age: Duration,
    validate: &ValidateFile,
) -> Result<SlurmConfig, ConfigError> {
    let url = args
        .slurm_url
        .clone()
        .or_else(|| file.url.clone())
        .ok_or(ConfigError::NoSlurmUrl)?;
    let token = match (
        &args.slurm_token_file,
        std::env::var("SLURM_JWT").ok().filter(|t| !t.is_empty()),
        &file.token_file,
    ) {
        (Some(p), _, _) => Some(read_token(p)?),
        (None, Some(t), _) => Some(
            t.trim()
                .strip_prefix("SLURM_JWT=")
                .unwrap_or(t.trim())
                .to_string(),
        ),
        (None, None, Some(p)) => Some(read_token(p)?),
        (None, None, None) => None,
    };
    let user = args
        .slurm_user
        .clone()
        .or_else(|| file.user.clone())
        // As `id -un`: the environment, else the account database (a
        // login shell without USER is common in cron and containers).
        .or_else(crate::host::login_name)
        .ok_or(ConfigError::NoSlurmUser)?;
    let secs = |v: Option<f64>, default: f64, key: &str| -> Result<Duration, ConfigError> {
        match v {
            None => Ok(Duration::from_secs_f64(default)),
            Some(s) => seconds(s, &format!("slurm.{key}")),
        }
    };
    let cluster_name = file.cluster_name.clone();
    let interval = secs(file.interval_s, 2.0, "interval_s")?;
    Ok(SlurmConfig {
        url,
        user,
        token,
        interval,
        timeout: secs(file.timeout_s, 10.0, "timeout_s")?,
        cluster_name,
        scontrol: file.scontrol.clone().unwrap_or_else(|| "scontrol".into()),
        checkpoint_signal: checkpoint_signal(file.checkpoint_signal.as_deref())?,
        validate: validate.resolve()?,
        slurm_conf: file
            .slurm_conf
            .clone()
            .or_else(|| std::env::var_os("SLURM_CONF").map(PathBuf::from)),
        rest_budget: match file.rest_budget {
            None => 0.03,
            Some(b) if b > 0.0 && b <= 1.0 => b,
            Some(b) => {
                return Err(ConfigError::RestBudget(b));
            }
        },
        full_jobs_interval: secs(file.full_jobs_interval_s, 30.0, "full_jobs_interval_s")?,
        max_interval: (max_data_age / 2).max(interval),
        api_version: args
            .slurm_api
            .as_deref()
            .or(file.api_version.as_deref())
            .map(str::parse)
            .transpose()?,
    })
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UiFile {
    pub stale_after_s: Option<f64>,
    pub no_color: Option<bool>,
    /// Ring the terminal bell on a new critical incident (off by default).
    pub bell_on_critical: Option<bool>,
    /// Mouse clicks and wheel in the console (on by default).
    pub mouse: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimFile {
    pub seed: Option<u64>,
    pub nodes: Option<usize>,
    pub jobs: Option<usize>,
    pub speed: Option<f64>,
}

/// The longest duration any setting takes: about 31 years. Anything
/// longer is a typo, and `Duration` cannot hold what f64 can.
pub const MAX_SECONDS: f64 = 1e9;

/// A duration in seconds from the configuration: finite, > 0 and at most
/// `MAX_SECONDS`, or a one-line error naming the key.
pub fn seconds(v: f64, key: &str) -> Result<Duration, ConfigError> {
    if v.is_finite() && v > 0.0 && v <= MAX_SECONDS {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(ConfigError::Seconds {
            key: key.to_string(),
            value: v,
        })
    }
}

pub use crate::actions::policy::Policy;

/// `[actions]` in the configuration file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionsFile {
    pub max_data_age_s: Option<f64>,
    pub max_partition_share_out: Option<f64>,
    pub max_nodes_per_window: Option<u32>,
    pub window_s: Option<f64>,
    /// How long an action may take before its outcome is re-read.
    pub timeout_s: Option<f64>,
    pub audit_log: Option<std::path::PathBuf>,
    /// The site's key for sealing armed steps (default: the operator's,
    /// `$XDG_STATE_HOME/nightshift/armed.key`).
    pub armed_key: Option<std::path::PathBuf>,
}

impl ActionsFile {
    pub fn resolve(&self, read_only: bool) -> Result<Policy, ConfigError> {
        let mut p = Policy {
            read_only,
            ..Policy::default()
        };
        if let Some(v) = self.max_data_age_s {
            p.max_data_age = seconds(v, "actions.max_data_age_s")?;
        }
        if let Some(v) = self.window_s {
            p.window = seconds(v, "actions.window_s")?;
        }
        if let Some(v) = self.max_partition_share_out {
            if !(0.0..=1.0).contains(&v) {
                return Err(ConfigError::Fraction {
                    key: "actions.max_partition_share_out".into(),
                    value: v,
                });
            }
            p.max_partition_share_out = v;
        }
        if let Some(v) = self.max_nodes_per_window {
            p.max_nodes_per_window = v;
        }
        Ok(p)
    }
}

/// Everything resolved.
#[derive(Debug, Clone)]
pub struct Settings {
    pub source: SourceConfig,
    pub read_only: bool,
    /// The configuration file read (`--config`, `NIGHTSHIFT_CONFIG`, or
    /// the one in the user's config directory); none: the defaults.
    pub config_file: Option<PathBuf>,
    pub log_file: Option<PathBuf>,
    /// The log's level from `-v`/`-q` (`NIGHTSHIFT_LOG` wins when set).
    pub log_level: &'static str,
    /// Data older than this is marked stale.
    pub stale_after: Duration,
    pub no_color: bool,
    /// Simulated cluster: sim seconds to run before a printing command answers.
    pub sim_seconds: u64,
    pub site: SiteParams,
    pub xid_catalog: XidCatalog,
    pub policy: Policy,
    /// How long an action may take before its outcome is re-read.
    pub action_timeout: Duration,
    /// Bounds on what is accepted from the outside (`[limits]`).
    pub limits: crate::limits::Limits,
    pub bell_on_critical: bool,
    pub mouse: bool,
    pub audit_log: PathBuf,
    /// `[actions] armed_key`: the site's key that seals armed steps.
    pub armed_key: Option<PathBuf>,
    pub endpoints: crate::sources::endpoints::Endpoints,
    /// `[topology]`: domains laid over every snapshot.
    pub topology: crate::sources::site_topology::SiteDomains,
    /// Play this recording instead of the source (`--replay`).
    pub replay: Option<PathBuf>,
    /// With `replay`: the time the printing commands answer for.
    pub at: Option<String>,
    /// The console records to this file as it runs (`--record`).
    pub record: Option<PathBuf>,
    /// Its name in `[[clusters]]`, when it is one of several.
    pub cluster: Option<String>,
    /// `[[policy]]`, checked and compiled: the autopilot's.
    pub policies: Vec<crate::autopilot::policy::Policy>,
    /// `[paging]`.
    pub paging: crate::autopilot::page::PagingFile,
}

impl Settings {
    /// The audit log, its armed steps sealed with the site's key when
    /// `[actions] armed_key` names one.
    pub fn audit(&self) -> crate::actions::audit::AuditLog {
        crate::actions::audit::AuditLog::new(self.audit_log.clone())
            .with_key(self.armed_key.clone())
    }

    /// The guard's settings for this cluster: the console's runner and the
    /// command line orchestrate an action with the same. `cluster_in_token`:
    /// the typed confirmation names the cluster (the console's).
    pub fn orchestrator(
        &self,
        cluster_in_token: bool,
    ) -> crate::actions::orchestrator::Orchestrator {
        crate::actions::orchestrator::Orchestrator {
            policy: self.policy.clone(),
            site: self.site.clone(),
            catalog: self.xid_catalog.clone(),
            log: self.audit(),
            timeout: self.action_timeout,
            cluster: self.cluster.clone(),
            cluster_in_token,
        }
    }
}

impl Settings {
    pub fn resolve(args: &GlobalArgs, file: FileConfig) -> Result<Settings, ConfigError> {
        let source = match (args.source, file.source.as_deref()) {
            (Some(k), _) => k,
            (None, None | Some("sim")) => SourceKind::Sim,
            (None, Some("slurm")) => SourceKind::Slurm,
            (None, Some("kube")) => SourceKind::Kube,
            (None, Some("none")) => SourceKind::None,
            (None, Some(other)) => {
                return Err(ConfigError::Source(other.to_string()));
            }
        };
        let speed = args.speed.or(file.sim.speed).unwrap_or(1.0);
        if !(speed.is_finite() && (0.0..=MAX_SPEED).contains(&speed)) {
            return Err(ConfigError::Speed(speed));
        }
        let nodes = args
            .nodes
            .or(file.sim.nodes)
            .unwrap_or(crate::sources::sim::MIN_NODES);
        if nodes > MAX_SIM_NODES {
            return Err(ConfigError::Nodes(nodes));
        }
        let jobs = args.jobs.or(file.sim.jobs);
        if let Some(j) = jobs.filter(|&j| j > MAX_SIM_JOBS) {
            return Err(ConfigError::Jobs(j));
        }
        let sim_seconds = args.sim_seconds.unwrap_or(0);
        if sim_seconds > MAX_SIM_SECONDS {
            return Err(ConfigError::SimSeconds(sim_seconds));
        }
        let limits = file.limits.resolve()?;
        // A recording is history: nothing in it can be acted on.
        let read_only = args.read_only || args.replay.is_some() || file.read_only.unwrap_or(false);
        let policy = file.actions.resolve(read_only)?;
        let source = match source {
            SourceKind::Sim => SourceConfig::Sim {
                sim: SimConfig {
                    seed: args.seed.or(file.sim.seed).unwrap_or(1),
                    nodes,
                    jobs,
                },
                speed,
            },
            SourceKind::Slurm => SourceConfig::Slurm(slurm_config(
                args,
                &file.slurm,
                policy.max_data_age,
                &file.validate,
            )?),
            SourceKind::Kube => SourceConfig::Kube(kube_config(args, &file.kube, &file.validate)?),
            SourceKind::None => SourceConfig::None,
        };
        let expected = source.expected_interval();
        let stale_after = match file.ui.stale_after_s {
            Some(s) => seconds(s, "ui.stale_after_s")?,
            None => (expected * 5).max(Duration::from_secs(10)),
        };
        // NO_COLOR, and a terminal that cannot do colour (TERM=dumb).
        let no_color = file.ui.no_color.unwrap_or(false)
            || std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
            || std::env::var("TERM").is_ok_and(|t| t == "dumb");
        let (site, xid_catalog) = file.engine.resolve()?;
        let endpoints = file.endpoints.resolve(args, &site)?;
        let audit_log = args
            .audit_log
            .clone()
            .or_else(|| file.actions.audit_log.clone())
            .or_else(|| crate::logging::default_path().map(|p| p.with_file_name("audit.jsonl")))
            .unwrap_or_else(|| PathBuf::from("nightshift-audit.jsonl"));
        Ok(Settings {
            source,
            read_only,
            config_file: args.config.clone(),
            log_file: args.log_file.clone().or(file.log_file),
            log_level: match (args.quiet, args.verbose) {
                (true, _) => "warn",
                (false, 0) => "info",
                (false, 1) => "debug",
                (false, _) => "trace",
            },
            stale_after,
            no_color,
            sim_seconds,
            replay: args.replay.clone(),
            at: args.at.clone(),
            record: args.record.clone(),
            cluster: None,
            limits,
            bell_on_critical: file.ui.bell_on_critical.unwrap_or(false),
            mouse: !args.no_mouse && file.ui.mouse.unwrap_or(true),
            site,
            xid_catalog,
            policy,
            audit_log,
            armed_key: file.actions.armed_key.clone(),
            endpoints,
            topology: file.topology.resolve()?,
            action_timeout: match file.actions.timeout_s {
                Some(v) => seconds(v, "actions.timeout_s")?,
                None => Duration::from_secs(60),
            },
            policies: crate::autopilot::policy::compile(&file.policy, &file.text)
                .map_err(ConfigError::Policy)?,
            paging: file.paging,
        })
    }
}

#[cfg(test)]
mod tests;
