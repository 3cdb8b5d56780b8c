//! The screens opened on one object: a node, a GPU, a job.

use super::{App, Intent, JOB_ACTIONS, Kind, NODE_ACTIONS, Row, Screen, open_selected};
use crate::engine::analysis::Focus;
use crossterm::event::{KeyCode, KeyEvent};

/// One node: its answers, GPUs and jobs.
pub(crate) struct Node;
/// One GPU: its readings, verdict and history.
pub(crate) struct Gpu;
/// One job: where it runs, why it waits, what it costs.
pub(crate) struct Job;

impl Kind for Node {
    fn title(&self) -> &'static str {
        "node"
    }

    fn object(&self) -> Option<&'static str> {
        Some("node")
    }

    fn names(&self, app: &App) -> Vec<String> {
        app.cluster.nodes.iter().map(|n| n.name.clone()).collect()
    }

    fn has(&self, app: &App, what: &str) -> bool {
        app.cluster.node(what).is_some()
    }

    fn on_key(&self, app: &App, key: KeyEvent) -> Option<Intent> {
        match key.code {
            // Between its GPUs and its jobs.
            KeyCode::Tab | KeyCode::BackTab => Some(Intent::SwitchPane),
            KeyCode::Enter => Some(open_selected(app)),
            _ => None,
        }
    }

    /// Its GPUs (first pane) or its jobs (second).
    fn rows(&self, app: &App, s: &Screen) -> Vec<Row> {
        super::super::index::node_rows(&app.cluster, &app.index, s)
    }

    fn focus(&self, _app: &App, s: &Screen) -> Focus {
        s.target.clone().map_or(Focus::None, Focus::Node)
    }

    fn opens(&self, _app: &App, s: &Screen) -> Vec<String> {
        s.target.iter().cloned().collect()
    }

    fn node_acted_on(&self, _app: &App, s: &Screen) -> Option<String> {
        s.target.clone()
    }

    fn hints(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("O", "options"),
            ("enter", "open"),
            ("tab", "gpus/jobs"),
            ("esc", "back"),
            (":", "view"),
            ("?", "help"),
            ("q", "quit"),
        ]
    }

    fn actions(&self) -> &'static [(&'static str, &'static str)] {
        NODE_ACTIONS
    }
}

/// The node of a GPU screen's `node/gpu` target.
fn node_of(target: &str) -> &str {
    target.rsplit_once('/').map_or(target, |(n, _)| n)
}

impl Kind for Gpu {
    fn title(&self) -> &'static str {
        "gpu"
    }

    fn object(&self) -> Option<&'static str> {
        Some("gpu")
    }

    fn names(&self, app: &App) -> Vec<String> {
        app.cluster
            .gpus()
            .map(|(n, g)| format!("{}/{}", n.name, g.index))
            .collect()
    }

    fn has(&self, app: &App, what: &str) -> bool {
        what.rsplit_once('/').is_some_and(|(n, g)| {
            app.cluster
                .node(n)
                .is_some_and(|n| n.gpus.iter().any(|x| x.index.to_string() == g))
        })
    }

    fn on_key(&self, app: &App, key: KeyEvent) -> Option<Intent> {
        open_or_scroll(app, key)
    }

    fn rows(&self, _app: &App, _s: &Screen) -> Vec<Row> {
        Vec::new()
    }

    /// Its node's answers.
    fn focus(&self, _app: &App, s: &Screen) -> Focus {
        s.target
            .as_deref()
            .map_or(Focus::None, |t| Focus::Node(node_of(t).to_string()))
    }

    fn opens(&self, _app: &App, s: &Screen) -> Vec<String> {
        s.target
            .as_deref()
            .and_then(|t| t.rsplit_once('/'))
            .map(|(n, _)| n.to_string())
            .into_iter()
            .collect()
    }

    fn node_acted_on(&self, app: &App, _s: &Screen) -> Option<String> {
        app.gpu_target()
            .map(|(n, _)| app.cluster.nodes[n].name.clone())
    }

    fn job_acted_on(&self, app: &App, _s: &Screen) -> Option<String> {
        app.gpu_detail_job()
    }

    fn actions(&self) -> &'static [(&'static str, &'static str)] {
        NODE_ACTIONS
    }
}

impl Kind for Job {
    fn title(&self) -> &'static str {
        "job"
    }

    fn object(&self) -> Option<&'static str> {
        Some("job")
    }

    fn names(&self, app: &App) -> Vec<String> {
        app.cluster.jobs.iter().map(|j| j.id.clone()).collect()
    }

    fn has(&self, app: &App, what: &str) -> bool {
        app.cluster.job(what).is_some()
    }

    fn on_key(&self, app: &App, key: KeyEvent) -> Option<Intent> {
        open_or_scroll(app, key)
    }

    /// The nodes it runs on.
    fn rows(&self, app: &App, s: &Screen) -> Vec<Row> {
        super::super::index::job_rows(&app.cluster, &app.index, s)
    }

    fn focus(&self, _app: &App, s: &Screen) -> Focus {
        s.target.clone().map_or(Focus::None, Focus::Job)
    }

    /// Its nodes (the first 64).
    fn opens(&self, app: &App, s: &Screen) -> Vec<String> {
        s.target
            .as_deref()
            .and_then(|id| app.cluster.job(id))
            .map(|j| j.nodes.iter().take(64).cloned().collect())
            .unwrap_or_default()
    }

    fn job_acted_on(&self, _app: &App, s: &Screen) -> Option<String> {
        s.target.clone()
    }

    fn actions(&self) -> &'static [(&'static str, &'static str)] {
        JOB_ACTIONS
    }
}

/// A detail screen's text scrolls to its last line (`pgdn` `pgup`
/// `ctrl-d` `ctrl-u`; `j` `k` too when it has no list to move in);
/// `enter` opens what it points at.
fn open_or_scroll(app: &App, key: KeyEvent) -> Option<Intent> {
    let page = i32::from(app.size.1.saturating_sub(6).max(1));
    let ctrl = key
        .modifiers
        .contains(crossterm::event::KeyModifiers::CONTROL);
    let has_rows = !app.nav.rows.is_empty();
    Some(match key.code {
        KeyCode::Enter => open_selected(app),
        KeyCode::PageDown => Intent::Scroll(page),
        KeyCode::PageUp => Intent::Scroll(-page),
        KeyCode::Char('d') if ctrl => Intent::Scroll(page),
        KeyCode::Char('u') if ctrl => Intent::Scroll(-page),
        KeyCode::Down | KeyCode::Char('j') if !has_rows => Intent::Scroll(1),
        KeyCode::Up | KeyCode::Char('k') if !has_rows => Intent::Scroll(-1),
        _ => return None,
    })
}
