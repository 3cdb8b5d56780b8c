//! `[[clusters]]`: several clusters in one config, and which of them the
//! command line picks (`--context NAME`, `--all`).

use super::{
    ConfigError, EndpointsFile, FileConfig, KubeFile, Settings, SimFile, SlurmFile, TopologyFile,
};
use crate::cli::GlobalArgs;
use serde::Deserialize;

/// `[[clusters]]`: one cluster of several, with its own source and the
/// source's sections (`[clusters.slurm]`, `[clusters.kube]`,
/// `[clusters.sim]`, `[clusters.endpoints]`, `[clusters.topology]`). The
/// engine, actions, limits and ui sections are the top level's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    pub name: String,
    pub source: Option<String>,
    pub read_only: Option<bool>,
    #[serde(default)]
    pub sim: SimFile,
    #[serde(default)]
    pub slurm: SlurmFile,
    #[serde(default)]
    pub kube: KubeFile,
    #[serde(default)]
    pub endpoints: EndpointsFile,
    #[serde(default)]
    pub topology: TopologyFile,
}

impl FileConfig {
    /// The names of `[[clusters]]`, checked: each named, each once.
    pub fn cluster_names(&self) -> Result<Vec<String>, ConfigError> {
        let mut names: Vec<String> = Vec::new();
        for c in &self.clusters {
            let name = c.name.trim();
            if name.is_empty() || name.contains('/') || name.chars().any(char::is_control) {
                return Err(ConfigError::Cluster(format!(
                    "[[clusters]] name {:?}: a name without '/' (it is typed before the node: CLUSTER/NODE)",
                    c.name
                )));
            }
            if names.iter().any(|n| n == name) {
                return Err(ConfigError::Cluster(format!(
                    "[[clusters]] name {name:?} is used twice"
                )));
            }
            names.push(name.to_string());
        }
        Ok(names)
    }

    /// The configuration of cluster `i` alone: its own sections in place
    /// of the top level's, the rest the top level's.
    pub fn for_cluster(&self, i: usize) -> Option<FileConfig> {
        let c = self.clusters.get(i)?;
        Some(FileConfig {
            source: c.source.clone(),
            read_only: c.read_only.or(self.read_only),
            log_file: self.log_file.clone(),
            ui: self.ui.clone(),
            sim: c.sim.clone(),
            engine: self.engine.clone(),
            slurm: c.slurm.clone(),
            kube: c.kube.clone(),
            actions: self.actions.clone(),
            endpoints: c.endpoints.clone(),
            limits: self.limits.clone(),
            topology: c.topology.clone(),
            validate: self.validate.clone(),
            clusters: Vec::new(),
            // The site's policies hold for each of its clusters.
            policy: self.policy.clone(),
            paging: self.paging.clone(),
            text: self.text.clone(),
        })
    }
}

/// What the command line and the config say to watch.
#[derive(Debug)]
pub enum Selection {
    /// One cluster: the top level's source, or `--context NAME` of
    /// `[[clusters]]`.
    One(Box<Settings>),
    /// `--all`: every cluster of `[[clusters]]`, in the config's order.
    All(Vec<Settings>),
}

/// The flags that hold for every cluster of `[[clusters]]`: the source's
/// own flags (`--source`, `--slurm-url`, `--kubeconfig`, `--prometheus`, …)
/// would say the same for all of them, so each cluster's come from its
/// section alone.
fn cluster_args(args: &GlobalArgs) -> GlobalArgs {
    GlobalArgs {
        config: args.config.clone(),
        read_only: args.read_only,
        no_mouse: args.no_mouse,
        log_file: args.log_file.clone(),
        audit_log: args.audit_log.clone(),
        sim_seconds: args.sim_seconds,
        ..GlobalArgs::default()
    }
}

impl Settings {
    /// `--all`: every `[[clusters]]`; `--context NAME` naming one of them:
    /// that one (a name that is none of them is a kubeconfig context, as
    /// before); else the top level.
    pub fn select(args: &GlobalArgs, file: FileConfig) -> Result<Selection, ConfigError> {
        let names = file.cluster_names()?;
        let one = |i: usize, name: &str| -> Result<Settings, ConfigError> {
            let f = file.for_cluster(i).ok_or_else(|| {
                ConfigError::Cluster(format!("[[clusters]] {name:?}: not in the config"))
            })?;
            let mut s = Settings::resolve(&cluster_args(args), f)
                .map_err(|e| ConfigError::Cluster(format!("[[clusters]] {name:?}: {e}")))?;
            s.cluster = Some(name.to_string());
            // The breaker counts this cluster's own records.
            s.policy.cluster = Some(name.to_string());
            Ok(s)
        };
        if args.all {
            if names.is_empty() {
                return Err(ConfigError::Cluster(
                    "--all watches the clusters of [[clusters]], and the config has none".into(),
                ));
            }
            if args.replay.is_some() || args.record.is_some() {
                return Err(ConfigError::Cluster(
                    "--all records and replays no cluster: use --context NAME".into(),
                ));
            }
            let all = names
                .iter()
                .enumerate()
                .map(|(i, n)| one(i, n))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(Selection::All(all));
        }
        if let Some(i) = args
            .context
            .as_deref()
            .and_then(|c| names.iter().position(|n| n == c))
        {
            return Ok(Selection::One(Box::new(one(i, &names[i])?)));
        }
        let s = Settings::resolve(args, file)?;
        // A --context that names no [[clusters]] is a kubeconfig context —
        // only when the source is Kubernetes. Otherwise (a typo, the sim, a
        // Slurm) acting on the top level's source instead is refused.
        if let Some(c) = args.context.as_deref()
            && !s.source.has_contexts()
        {
            return Err(ConfigError::Cluster(if names.is_empty() {
                format!(
                    "--context {:?}: the config has no [[clusters]], and the source ({}) has no contexts",
                    crate::text::sanitize(c),
                    s.source.name()
                )
            } else {
                format!(
                    "--context {:?} is none of the config's clusters: {}",
                    crate::text::sanitize(c),
                    names.join(", ")
                )
            }));
        }
        Ok(Selection::One(Box::new(s)))
    }
}
