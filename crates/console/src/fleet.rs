//! Several clusters in one console (issue 28, `nightshift --all`): each
//! cluster keeps its own `App` — its source and freshness, its engine
//! answers, its guard — and the fleet overview shows them side by side,
//! with every open incident of every cluster in one list, its cluster's
//! name first. One cluster down never stalls the others: each app only
//! hears its own source.
//!
//! Keys on the overview: `1`–`9` open that cluster; `j`/`k` move over the
//! incidents and `enter` opens one in its cluster; `:ctx NAME` (tab
//! completes) opens a cluster from anywhere, `esc` on a cluster's first
//! screen (or `:ctx` alone) comes back here; `q` quits.

use crate::app::{App, Effect, Msg};
use crate::engine::incidents::Incident;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::time::Instant;

/// One cluster of the fleet.
pub struct Member {
    /// Its name in the config (`[[clusters]] name`).
    pub name: String,
    pub app: App,
}

pub struct Fleet {
    pub members: Vec<Member>,
    /// The cluster on screen; `None`: the overview.
    pub active: Option<usize>,
    /// The overview's selected incident.
    pub selected: usize,
    /// `:` typed on the overview.
    pub command: Option<String>,
    pub flash: Option<String>,
    /// One cluster on its own (`nightshift` without `--all`): always on
    /// screen, no overview to go back to.
    pub alone: bool,
}

/// What the loop carries out: a member's effect (its runner, the bell),
/// or leaving.
pub type Effects = Vec<(usize, Effect)>;

impl Fleet {
    /// The fleet of these clusters; each app learns the others' names.
    pub fn new(members: Vec<Member>) -> Fleet {
        let names: Vec<String> = members.iter().map(|m| m.name.clone()).collect();
        let members = members
            .into_iter()
            .map(|m| Member {
                app: m.app.with_contexts(&m.name, names.clone()),
                name: m.name,
            })
            .collect();
        Fleet {
            members,
            active: None,
            selected: 0,
            command: None,
            flash: None,
            alone: false,
        }
    }

    /// One cluster as a fleet of one: its app always on screen, knowing
    /// no other cluster (`:ctx` says there is none to switch to).
    pub fn alone(name: String, app: App) -> Fleet {
        Fleet {
            members: vec![Member { name, app }],
            active: Some(0),
            selected: 0,
            command: None,
            flash: None,
            alone: true,
        }
    }

    /// Every open incident of every cluster: the most severe first, then
    /// the newest.
    pub fn rows(&self) -> Vec<(usize, &Incident)> {
        let mut rows: Vec<(usize, &Incident)> = self
            .members
            .iter()
            .enumerate()
            .flat_map(|(m, member)| {
                member
                    .app
                    .analysis
                    .as_ref()
                    .into_iter()
                    .flat_map(|a| a.base.incidents.iter().filter(|i| i.is_open()))
                    .map(move |i| (m, i))
            })
            .collect();
        rows.sort_by(|a, b| {
            b.1.severity
                .cmp(&a.1.severity)
                .then(b.1.time.cmp(&a.1.time))
                .then(a.0.cmp(&b.0))
        });
        rows
    }

    /// A message for cluster `m` alone (its source, its runner).
    pub fn to_member(&mut self, m: usize, msg: Msg, now: Instant) -> Effects {
        let Some(member) = self.members.get_mut(m) else {
            return Vec::new();
        };
        let effects = member.app.update(msg, now);
        self.take(m, effects)
    }

    /// A message for every cluster (a tick, a resize).
    pub fn to_all(&mut self, msg: &Msg, now: Instant) -> Effects {
        let mut out = Vec::new();
        for m in 0..self.members.len() {
            let effects = self.members[m].app.update(msg.clone(), now);
            out.extend(self.take(m, effects));
        }
        out
    }

    /// Switches clusters for `Context` effects; passes the rest on.
    fn take(&mut self, m: usize, effects: Vec<Effect>) -> Effects {
        let mut out = Vec::new();
        for e in effects {
            match e {
                // One cluster: nothing to switch to (the app says so).
                Effect::Context(_) if self.alone => {}
                Effect::Context(None) => self.active = None,
                Effect::Context(Some(name)) => self.switch(&name),
                other => out.push((m, other)),
            }
        }
        out
    }

    fn switch(&mut self, name: &str) {
        match self.members.iter().position(|m| m.name == name) {
            Some(i) => self.active = Some(i),
            None => self.flash = Some(format!("no cluster {name:?}")),
        }
    }

    /// A key: to the cluster on screen, else the overview's.
    pub fn key(&mut self, key: KeyEvent, now: Instant) -> Effects {
        if let Some(m) = self.active {
            return self.to_member(m, Msg::Key(key), now);
        }
        if let Some(text) = self.command.take() {
            return self.command_key(key, text);
        }
        self.flash = None;
        let rows = self.rows().len();
        match key.code {
            KeyCode::Char('q') => return vec![(0, Effect::Quit)],
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                return vec![(0, Effect::Quit)];
            }
            KeyCode::Char(':') => self.command = Some(String::new()),
            KeyCode::Char(d @ '1'..='9') => {
                let i = (d as usize) - ('1' as usize);
                if i < self.members.len() {
                    self.active = Some(i);
                } else {
                    self.flash = Some(format!("{} clusters", self.members.len()));
                }
            }
            KeyCode::Down | KeyCode::Char('j') => {
                self.selected = (self.selected + 1).min(rows.saturating_sub(1));
            }
            KeyCode::Up | KeyCode::Char('k') => self.selected = self.selected.saturating_sub(1),
            KeyCode::Home | KeyCode::Char('g') => self.selected = 0,
            KeyCode::End | KeyCode::Char('G') => self.selected = rows.saturating_sub(1),
            KeyCode::Enter => {
                let target = self
                    .rows()
                    .get(self.selected)
                    .map(|(m, i)| (*m, i.id.clone()));
                match target {
                    Some((m, id)) => {
                        self.active = Some(m);
                        self.members[m].app.open_incident(&id);
                    }
                    None => self.flash = Some("no open incident in any cluster".into()),
                }
            }
            _ => {}
        }
        Vec::new()
    }

    /// `:` on the overview: `ctx NAME` (tab completes), `q`.
    fn command_key(&mut self, key: KeyEvent, mut text: String) -> Effects {
        match key.code {
            KeyCode::Esc => {}
            KeyCode::Enter => {
                // The prompt's colon pressed twice is forgiven, as in a
                // cluster's console.
                let cmd = text.trim().trim_start_matches(':').trim_start();
                match cmd.split_once(' ') {
                    _ if cmd == "q" || cmd == "quit" => return vec![(0, Effect::Quit)],
                    Some(("ctx", name)) => self.switch(name.trim()),
                    _ if cmd == "ctx" || cmd.is_empty() => {}
                    _ => {
                        self.flash = Some(format!(
                            "on the fleet: :ctx NAME ({}), :q",
                            self.names().join(", ")
                        ))
                    }
                }
            }
            KeyCode::Tab => {
                let word = text.strip_prefix("ctx ").unwrap_or("");
                let hits: Vec<String> = if text.starts_with("ctx ") {
                    self.names()
                        .into_iter()
                        .filter(|n| n.starts_with(word))
                        .collect()
                } else if "ctx ".starts_with(text.as_str()) {
                    vec![String::new()]
                } else {
                    Vec::new()
                };
                match hits.as_slice() {
                    [one] => text = format!("ctx {one}"),
                    [] => {}
                    many => self.flash = Some(many.join("  ")),
                }
                self.command = Some(text);
            }
            KeyCode::Backspace => {
                text.pop();
                self.command = Some(text);
            }
            KeyCode::Char(c) => {
                text.push(c);
                self.command = Some(text);
            }
            _ => self.command = Some(text),
        }
        Vec::new()
    }

    pub fn names(&self) -> Vec<String> {
        self.members.iter().map(|m| m.name.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::analysis::{Analysis, Focus};
    use crate::engine::xid::XidCatalog;
    use crate::protocol::source::{Origin, Update};
    use crate::sim::{Sim, SimConfig};
    use std::sync::Arc;
    use std::time::Duration;

    /// A cluster's app after the sim's `seconds`, with its analysis.
    fn member(name: &str, seconds: u64) -> Member {
        let mut app =
            App::new("sim", false, true, Duration::from_secs(10)).measured_by(crate::views::extent);
        let mut sim = Sim::new(SimConfig::default()).expect("sim");
        sim.advance(seconds);
        let c = Arc::new(sim.snapshot());
        let now = Instant::now();
        let _ = app.update(Msg::Source(Update::Snapshot(c.clone())), now);
        let _ = app.update(Msg::Source(Update::ok(Origin::Scheduler)), now);
        let a = Analysis::compute(
            &c,
            None,
            &Focus::None,
            &crate::engine::SiteParams::default(),
            &XidCatalog::default(),
        );
        let _ = app.update(Msg::Analysis(Arc::new(a)), now);
        Member {
            name: name.into(),
            app,
        }
    }

    fn press(f: &mut Fleet, keys: &str) -> Effects {
        keys.chars()
            .flat_map(|c| f.key(KeyEvent::from(KeyCode::Char(c)), Instant::now()))
            .collect()
    }

    fn code(f: &mut Fleet, k: KeyCode) -> Effects {
        f.key(KeyEvent::from(k), Instant::now())
    }

    #[test]
    fn the_overview_lists_every_clusters_incidents_and_opens_them_in_their_cluster() {
        let mut f = Fleet::new(vec![member("east", 0), member("west", 2000)]);
        let rows = f.rows();
        assert!(rows.iter().any(|(m, _)| *m == 0) && rows.iter().any(|(m, _)| *m == 1));
        assert!(
            rows.windows(2).all(|w| w[0].1.severity >= w[1].1.severity),
            "the most severe first"
        );
        // Each app knows its own name and the others'.
        assert_eq!(f.members[1].app.context.as_deref(), Some("west"));
        // enter on a row of the second cluster: that cluster, on the
        // incident's node.
        let i = rows.iter().position(|(m, _)| *m == 1).expect("a west row");
        // A domain's incident opens the domain's nodes (a list filtered
        // to it); a node's, the node.
        let inc = rows[i].1;
        let (node, domain) = if inc.kind == crate::engine::incidents::IncidentKind::Domain {
            (None, Some(format!("domain:{}", inc.node)))
        } else {
            (Some(inc.node.clone()), None)
        };
        let id = inc.id.clone();
        drop(rows);
        for _ in 0..i {
            code(&mut f, KeyCode::Down);
        }
        code(&mut f, KeyCode::Enter);
        assert_eq!(f.active, Some(1), "incident {id}");
        let s = f.members[1].app.screen();
        assert_eq!(s.target, node);
        let filtered = domain.is_some();
        if let Some(d) = domain {
            assert_eq!(s.filter, d);
        }
        // esc on its node (a domain's list: its filter, then the list),
        // then on its first screen: the fleet again.
        code(&mut f, KeyCode::Esc);
        assert_eq!(f.active, Some(1));
        if filtered {
            code(&mut f, KeyCode::Esc);
            assert_eq!(f.active, Some(1));
        }
        code(&mut f, KeyCode::Esc);
        assert_eq!(f.active, None);
        // A digit opens a cluster; `:ctx NAME` in a cluster switches.
        press(&mut f, "1");
        assert_eq!(f.active, Some(0));
        press(&mut f, ":ctx we");
        code(&mut f, KeyCode::Tab);
        code(&mut f, KeyCode::Enter);
        assert_eq!(f.active, Some(1), "tab completed west");
        press(&mut f, ":ctx nowhere");
        code(&mut f, KeyCode::Enter);
        assert_eq!(f.active, Some(1));
        assert!(
            f.members[1]
                .app
                .flash
                .as_deref()
                .is_some_and(|m| m.contains("no cluster") && m.contains("east, west")),
            "{:?}",
            f.members[1].app.flash
        );
        press(&mut f, ":ctx");
        code(&mut f, KeyCode::Enter);
        assert_eq!(f.active, None, ":ctx alone: the fleet");
        // On the overview: `:ctx` too, with completion, and q leaves.
        press(&mut f, ":ctx e");
        code(&mut f, KeyCode::Tab);
        assert_eq!(f.command.as_deref(), Some("ctx east"));
        code(&mut f, KeyCode::Enter);
        assert_eq!(f.active, Some(0));
        code(&mut f, KeyCode::Esc);
        let fx = press(&mut f, "q");
        assert!(matches!(fx.as_slice(), [(0, Effect::Quit)]), "{fx:?}");
    }

    /// A message for one cluster reaches its app alone: the other's data
    /// stays as it was (one cluster's source failing stalls nothing else).
    #[test]
    fn one_clusters_error_stays_its_own() {
        let mut f = Fleet::new(vec![member("east", 0), member("west", 0)]);
        let now = Instant::now();
        let e = crate::protocol::source::SourceError::Other("slurmrestd is gone".into());
        f.to_member(1, Msg::Source(Update::failed(Origin::Scheduler, e)), now);
        assert!(f.members[1].app.failing_origin().is_some());
        assert!(f.members[0].app.failing_origin().is_none());
    }
}
