//! `[engine]` in the configuration: the decision engine's site
//! parameters in human units, checked and resolved.

use super::{ConfigError, MAX_SECONDS};
use crate::engine::repeat::RepeatRule;
use crate::engine::xid::XidCatalog;
use crate::engine::{SiteParams, units};
use serde::Deserialize;
use std::path::PathBuf;

/// `[engine]`: the decision engine's site parameters, in human units.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineFile {
    pub storage_read_bw: Option<String>,
    pub storage_write_bw: Option<String>,
    pub node_read_bw: Option<String>,
    pub startup: Option<String>,
    pub gpu_hour_price: Option<f64>,
    pub bytes_per_param: Option<u64>,
    pub sbe_watch_per_hour: Option<f64>,
    pub nvlink_watch_per_hour: Option<f64>,
    pub nvlink_drain_per_hour: Option<f64>,
    pub domain_window: Option<String>,
    pub domain_min_nodes: Option<u32>,
    pub default_time_limit: Option<String>,
    pub limit_overrun: Option<String>,
    pub preempt_requeues: Option<bool>,
    pub checkpoint_wait_max: Option<String>,
    pub gpu_reset: Option<String>,
    pub node_reboot: Option<String>,
    pub stall_window: Option<String>,
    pub stall_util_min: Option<f64>,
    pub stall_occupancy_max: Option<f64>,
    /// `3 in 30d`: this many hardware faults of a kind in this long make
    /// a node a repeat offender (its options recommend repair).
    pub repeat_offender: Option<String>,
    pub xid_catalog: Option<PathBuf>,
}

impl EngineFile {
    /// The engine's rates and sizes: NaN, an infinity, 0 or a negative
    /// would make every GPU healthy, or none.
    fn rates(&self, p: &mut SiteParams) -> Result<(), ConfigError> {
        if let Some(v) = self.bytes_per_param {
            if v == 0 {
                return Err(ConfigError::Rate {
                    key: "bytes_per_param",
                    value: 0.0,
                });
            }
            p.bytes_per_param = v;
        }
        // Rates the engine compares by: NaN, an
        // infinity, 0 or a negative would make every GPU healthy, or none.
        for (key, v, slot) in [
            (
                "sbe_watch_per_hour",
                self.sbe_watch_per_hour,
                &mut p.sbe_watch_per_hour,
            ),
            (
                "nvlink_watch_per_hour",
                self.nvlink_watch_per_hour,
                &mut p.nvlink_watch_per_hour,
            ),
            (
                "nvlink_drain_per_hour",
                self.nvlink_drain_per_hour,
                &mut p.nvlink_drain_per_hour,
            ),
        ] {
            if let Some(v) = v {
                if !(v.is_finite() && v > 0.0) {
                    return Err(ConfigError::Rate { key, value: v });
                }
                *slot = v;
            }
        }
        Ok(())
    }

    pub(super) fn resolve(&self) -> Result<(SiteParams, XidCatalog), ConfigError> {
        let mut p = SiteParams::default();
        fn ctx(key: &'static str) -> impl Fn(units::UnitError) -> ConfigError {
            move |source| ConfigError::Unit { key, source }
        }
        if let Some(v) = &self.storage_read_bw {
            p.storage_read_bw = units::parse_bandwidth(v).map_err(ctx("storage_read_bw"))?;
        }
        if let Some(v) = &self.storage_write_bw {
            p.storage_write_bw = units::parse_bandwidth(v).map_err(ctx("storage_write_bw"))?;
        }
        if let Some(v) = &self.node_read_bw {
            p.node_read_bw = units::parse_bandwidth(v).map_err(ctx("node_read_bw"))?;
        }
        // A duration in words, at most MAX_SECONDS.
        let dur = |v: &str, key: &'static str| -> Result<u64, ConfigError> {
            let s = units::parse_duration(v).map_err(ctx(key))?;
            if s as f64 > MAX_SECONDS {
                return Err(ConfigError::TooLong {
                    key,
                    given: v.to_string(),
                });
            }
            Ok(s)
        };
        if let Some(v) = &self.startup {
            p.startup_s = dur(v, "startup")?;
        }
        if let Some(v) = &self.default_time_limit {
            p.default_time_limit_s = dur(v, "default_time_limit")?;
        }
        if let Some(v) = &self.limit_overrun {
            p.limit_overrun_s = dur(v, "limit_overrun")?;
        }
        if let Some(v) = self.gpu_hour_price {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ConfigError::Price(v));
            }
            p.gpu_hour_price = Some(v);
        }
        self.rates(&mut p)?;
        if let Some(v) = &self.domain_window {
            p.domain_window_s = dur(v, "domain_window")?;
        }
        if let Some(v) = self.domain_min_nodes {
            if v < 2 {
                return Err(ConfigError::DomainMinNodes(v));
            }
            p.domain_min_nodes = v;
        }
        if let Some(v) = self.preempt_requeues {
            p.preempt_requeues = v;
        }
        if let Some(v) = &self.checkpoint_wait_max {
            p.checkpoint_wait_max_s = dur(v, "checkpoint_wait_max")?;
        }
        if let Some(v) = &self.gpu_reset {
            p.gpu_reset_s = dur(v, "gpu_reset")?;
        }
        if let Some(v) = &self.node_reboot {
            p.node_reboot_s = dur(v, "node_reboot")?;
        }
        if let Some(v) = &self.stall_window {
            p.stall_window_s = dur(v, "stall_window")?;
        }
        for (key, v, slot) in [
            ("stall_util_min", self.stall_util_min, &mut p.stall_util_min),
            (
                "stall_occupancy_max",
                self.stall_occupancy_max,
                &mut p.stall_occupancy_max,
            ),
        ] {
            if let Some(v) = v {
                if !(0.0..=1.0).contains(&v) {
                    return Err(ConfigError::Fraction {
                        key: format!("engine.{key}"),
                        value: v,
                    });
                }
                *slot = v;
            }
        }
        if let Some(v) = &self.repeat_offender {
            p.repeat_offender = RepeatRule::parse(v).map_err(ConfigError::RepeatRule)?;
        }
        let catalog = match &self.xid_catalog {
            Some(path) => XidCatalog::with_overrides(path)?,
            None => XidCatalog::default(),
        };
        Ok((p, catalog))
    }
}
