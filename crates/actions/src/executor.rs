//! Executors: how an action reaches its backend. The handle and the
//! `Scheduler` trait are the core's protocol; each backend implements the
//! trait beside its own reading (Slurm's in `sources::slurm::exec`,
//! Kubernetes' in `sources::kube::exec`, the sim's in `sources::sim`).

pub use crate::protocol::scheduler::{Executor, ObserveError, Pending, Scheduler};
