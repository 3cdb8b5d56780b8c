//! Where the operator is, a component of its own: the screens opened, one
//! on another (the overview at the bottom, never left), the rows of the
//! one on top with its selection, and the overview's node grid. What rows
//! a screen has is its kind's (`screens`); keeping the selection on the
//! same item across snapshots is here.

use super::{Row, Screen, View};

#[derive(Debug, Clone)]
pub struct Navigation {
    /// The screens opened: never empty, the overview first.
    pub(crate) stack: Vec<Screen>,
    /// The rows of the screen on top, in display order.
    pub(crate) rows: Vec<Row>,
    /// The overview's node grid: node indices, nodes with problems first.
    pub(crate) grid: Vec<usize>,
}

impl Default for Navigation {
    fn default() -> Navigation {
        Navigation {
            stack: vec![Screen::new(View::Overview, None)],
            rows: Vec::new(),
            grid: Vec::new(),
        }
    }
}

impl Navigation {
    /// The screen on top.
    pub fn screen(&self) -> &Screen {
        // Never empty: `pop` keeps the overview.
        &self.stack[self.stack.len() - 1]
    }

    pub(crate) fn screen_mut(&mut self) -> &mut Screen {
        let last = self.stack.len() - 1;
        &mut self.stack[last]
    }

    /// Every screen opened, the overview first.
    pub fn stack(&self) -> &[Screen] {
        &self.stack
    }

    /// A screen `:` opens: on the overview, in place of the ones above it.
    pub(crate) fn open(&mut self, view: View) {
        self.stack.truncate(1);
        if view != View::Overview {
            self.stack.push(Screen::new(view, None));
        }
    }

    /// A screen opened on top of this one.
    pub(crate) fn push(&mut self, screen: Screen) {
        self.stack.push(screen);
    }

    /// Back to the screen below; false on the overview (it stays).
    pub(crate) fn pop(&mut self) -> bool {
        if self.stack.len() > 1 {
            self.stack.pop();
            true
        } else {
            false
        }
    }

    /// The selected row of the screen on top.
    pub fn selected_row(&self) -> Option<Row> {
        self.rows.get(self.screen().selected).copied()
    }

    /// New rows; the selection on `found` (where its item is now), else
    /// where it was, within the rows.
    pub(crate) fn set_rows(&mut self, rows: Vec<Row>, found: Option<usize>) {
        self.rows = rows;
        let len = self.rows.len();
        let s = self.screen_mut();
        if let Some(i) = found {
            s.selected = i;
        }
        s.selected = s.selected.min(len.saturating_sub(1));
    }

    /// The row at `index` selected (the last where there are fewer).
    pub(crate) fn select(&mut self, index: usize) {
        let len = self.rows.len();
        self.screen_mut().selected = index.min(len.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overview_is_never_left_and_the_selection_stays_within_the_rows() {
        let mut n = Navigation::default();
        assert!(!n.pop(), "the overview stays");
        n.open(View::Nodes);
        n.push(Screen::new(View::NodeDetail, Some("h100-03".into())));
        assert_eq!(n.stack().len(), 3);
        n.open(View::Jobs);
        let views: Vec<View> = n.stack().iter().map(|s| s.view).collect();
        assert_eq!(views, [View::Overview, View::Jobs]);
        n.set_rows(vec![Row::Job(0), Row::Job(1), Row::Job(2)], None);
        n.select(9);
        assert_eq!(n.selected_row(), Some(Row::Job(2)));
        n.set_rows(vec![Row::Job(5), Row::Job(2)], Some(1));
        assert_eq!(n.selected_row(), Some(Row::Job(2)), "followed its item");
        n.set_rows(vec![Row::Job(7)], None);
        assert_eq!(n.screen().selected, 0, "within the rows");
        assert!(n.pop());
        assert_eq!(n.screen().view, View::Overview);
    }
}
