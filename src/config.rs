//! Settings: defaults, overridden by the TOML file, overridden by flags.

use crate::cli::{GlobalArgs, SourceKind};
use crate::sources::SourceConfig;
use crate::sources::sim::SimConfig;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The TOML file. Every key is optional; see config/nightshift.example.toml.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub source: Option<String>,
    pub read_only: Option<bool>,
    pub log_file: Option<PathBuf>,
    #[serde(default)]
    pub ui: UiFile,
    #[serde(default)]
    pub sim: SimFile,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UiFile {
    pub stale_after_s: Option<f64>,
    pub no_color: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimFile {
    pub seed: Option<u64>,
    pub nodes: Option<usize>,
    pub jobs: Option<usize>,
    pub speed: Option<f64>,
}

/// Everything resolved.
#[derive(Debug, Clone)]
pub struct Settings {
    pub source: SourceConfig,
    pub read_only: bool,
    pub log_file: Option<PathBuf>,
    /// Data older than this is marked stale.
    pub stale_after: Duration,
    pub no_color: bool,
}

impl FileConfig {
    pub fn load(path: &Path) -> Result<FileConfig, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| format!("config {}: {e}", path.display()))
    }
}

impl Settings {
    pub fn resolve(args: &GlobalArgs, file: FileConfig) -> Result<Settings, String> {
        let source = match (args.source, file.source.as_deref()) {
            (Some(SourceKind::Sim), _) | (None, None | Some("sim")) => SourceKind::Sim,
            (None, Some(other)) => {
                return Err(format!("config: unknown source {other:?} (known: sim)"));
            }
        };
        let speed = args.speed.or(file.sim.speed).unwrap_or(1.0);
        if !(speed.is_finite() && speed >= 0.0) {
            return Err(format!("--speed must be a number ≥ 0, got {speed}"));
        }
        let source = match source {
            SourceKind::Sim => SourceConfig::Sim {
                sim: SimConfig {
                    seed: args.seed.or(file.sim.seed).unwrap_or(1),
                    nodes: args
                        .nodes
                        .or(file.sim.nodes)
                        .unwrap_or(crate::sources::sim::MIN_NODES),
                    jobs: args.jobs.or(file.sim.jobs),
                },
                speed,
            },
        };
        let expected = source.expected_interval();
        let stale_after = match file.ui.stale_after_s {
            Some(s) if s.is_finite() && s > 0.0 => Duration::from_secs_f64(s),
            Some(s) => return Err(format!("config: ui.stale_after_s must be > 0, got {s}")),
            None => (expected * 5).max(Duration::from_secs(10)),
        };
        let no_color = file.ui.no_color.unwrap_or(false)
            || std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Ok(Settings {
            source,
            read_only: args.read_only || file.read_only.unwrap_or(false),
            log_file: args.log_file.clone().or(file.log_file),
            stale_after,
            no_color,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_file_and_the_file_overrides_defaults() {
        let file: FileConfig =
            toml::from_str("read_only = true\n[sim]\nseed = 5\nnodes = 32\n").expect("toml");
        let args = GlobalArgs {
            seed: Some(9),
            ..GlobalArgs::default()
        };
        let s = Settings::resolve(&args, file).expect("settings");
        assert!(s.read_only);
        match s.source {
            SourceConfig::Sim { sim, speed } => {
                assert_eq!((sim.seed, sim.nodes, speed), (9, 32, 1.0));
            }
        }
    }

    #[test]
    fn bad_config_is_a_clear_error() {
        let err = toml::from_str::<FileConfig>("colour = 1").expect_err("unknown key");
        assert!(err.to_string().contains("colour"), "{err}");
        let file: FileConfig = toml::from_str("source = \"pbs\"").expect("toml");
        let err = Settings::resolve(&GlobalArgs::default(), file).expect_err("unknown source");
        assert!(err.contains("pbs"));
    }

    #[test]
    fn the_example_config_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/nightshift.example.toml");
        let file = FileConfig::load(&path).expect("example config");
        Settings::resolve(&GlobalArgs::default(), file).expect("example settings");
    }
}
