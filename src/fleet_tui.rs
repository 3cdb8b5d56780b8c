//! `nightshift --all`: one console over every cluster of `[[clusters]]`.
//! Each cluster has what a one-cluster console has — its source, its
//! analyst, its action runner (with the cluster's name in the preview, the
//! typed confirmation and the audit record) — and its messages reach only
//! its own app: a cluster whose source stalls or dies leaves the others as
//! they are. Each is started as the one cluster is (`tui::start`) and the
//! loop is the same (`tui::console`), over a fleet of several.

use crate::app::Msg;
use crate::config::Settings;
use crate::error::CommandError;
use crate::fleet::Fleet;
use tokio::sync::mpsc;

pub async fn run(all: Vec<Settings>) -> Result<(), CommandError> {
    let (tx, rx) = mpsc::channel::<(usize, Msg)>(256);
    let mut members = Vec::new();
    let mut links = Vec::new();
    let mut taps = Vec::new();
    for (i, s) in all.iter().enumerate() {
        // A cluster whose source cannot even start (a bad URL in its
        // section) is named: the fleet does not open half a fleet.
        let started = crate::tui::start(i, s, &tx).map_err(|e| {
            crate::config::ConfigError::Cluster(format!(
                "[[clusters]] {:?}: {e}",
                s.cluster.as_deref().unwrap_or("?")
            ))
        })?;
        members.push(started.member);
        links.push(started.link);
        taps.extend(started.tap);
    }
    drop(tx);
    let mouse = all.first().is_some_and(|s| s.mouse);
    let result = crate::tui::console(Fleet::new(members), rx, links, mouse).await;
    for tap in taps {
        tap.finish().await;
    }
    result
}
