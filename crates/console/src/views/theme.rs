//! Styles, with a monochrome variant for NO_COLOR: there, meaning is carried
//! by glyphs and bold/reverse alone.

use crate::engine::xid::ActionClass;
use crate::model::{Gpu, GpuHealth, NodeState};
use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone, Copy)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    fn fg(self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }

    pub fn title(self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }

    pub fn dim(self) -> Style {
        if self.color {
            Style::default().fg(Color::DarkGray)
        } else {
            Style::default()
        }
    }

    pub fn header_row(self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }

    pub fn selected(self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }

    pub fn critical(self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }

    pub fn warn(self) -> Style {
        self.fg(Color::Yellow)
    }

    pub fn ok(self) -> Style {
        self.fg(Color::Green)
    }

    pub fn badge(self) -> Style {
        if self.color {
            Style::default()
                .fg(Color::Black)
                .bg(Color::Yellow)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD)
        }
    }

    pub fn alarm(self) -> Style {
        if self.color {
            Style::default()
                .fg(Color::White)
                .bg(Color::Red)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD)
        }
    }

    pub fn health(self, h: GpuHealth) -> Style {
        match h {
            GpuHealth::Ok => Style::default(),
            GpuHealth::Warn => self.warn(),
            GpuHealth::Critical => self.critical(),
        }
    }

    /// How loud a recommended action is: drains are critical.
    pub fn action(self, a: ActionClass) -> Style {
        if a.needs_drain() {
            self.critical()
        } else if a == ActionClass::None {
            self.dim()
        } else {
            self.warn()
        }
    }

    pub fn node_state(self, s: NodeState) -> Style {
        match s {
            NodeState::Up => self.ok(),
            NodeState::Cordoned | NodeState::Draining | NodeState::Reserved => self.warn(),
            NodeState::Drain | NodeState::Down | NodeState::Unknown => self.critical(),
        }
    }

    /// A column cell's tone as a style.
    pub fn tone(self, t: crate::columns::Tone) -> Style {
        use crate::columns::Tone;
        match t {
            Tone::Plain => Style::default(),
            Tone::Ok => self.ok(),
            Tone::Warn => self.warn(),
            Tone::Critical => self.critical(),
            Tone::Dim => self.dim(),
        }
    }

    /// One GPU as a grid cell: the glyph tells occupancy (or trouble), the
    /// colour health. Works without colour.
    pub fn gpu_cell(self, gpu: &Gpu, health: GpuHealth, node_usable: bool) -> (char, Style) {
        const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
        match health {
            GpuHealth::Critical => return ('X', self.alarm()),
            GpuHealth::Warn => return ('!', self.badge()),
            GpuHealth::Ok => {}
        }
        if gpu.job.is_none() {
            return if node_usable {
                ('·', self.dim())
            } else {
                ('-', self.dim())
            };
        }
        match gpu.sm_occupancy {
            None => ('?', self.warn()),
            Some(o) => {
                let level = ((o.clamp(0.0, 1.0) * 7.0).round() as usize).min(7);
                let style = if o < 0.1 { self.warn() } else { self.ok() };
                (BARS[level], style)
            }
        }
    }
}
