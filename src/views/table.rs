//! A list that draws only the rows that fit: O(visible rows) per frame.

use super::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Row, Table};

/// First row to show so that `selected` is on screen. A pure function of
/// its inputs: drawing keeps no scroll state.
pub fn offset(selected: usize, height: usize) -> usize {
    if height == 0 {
        0
    } else {
        selected.saturating_sub(height - 1)
    }
}

pub struct List<'a> {
    pub title: String,
    pub header: &'a [&'a str],
    pub widths: &'a [Constraint],
    pub len: usize,
    pub selected: Option<usize>,
    pub focused: bool,
}

/// Draws a bordered table; `row(i)` builds row `i` and is called only for
/// the rows that are visible.
pub fn draw<'r>(
    f: &mut Frame,
    area: Rect,
    theme: Theme,
    list: List,
    mut row: impl FnMut(usize) -> Vec<Cell<'r>>,
    style_of: impl Fn(usize) -> Style,
) {
    let inner_height = area.height.saturating_sub(3) as usize; // borders + header
    let sel = list.selected.unwrap_or(0).min(list.len.saturating_sub(1));
    let start = offset(sel, inner_height);
    let end = (start + inner_height).min(list.len);
    let rows: Vec<Row> = (start..end)
        .map(|i| {
            let mut style = style_of(i);
            if list.focused && list.selected == Some(i) {
                style = style.patch(theme.selected());
            }
            Row::new(row(i)).style(style)
        })
        .collect();
    let shown = if list.len == 0 {
        "empty".to_string()
    } else {
        format!("{}-{} of {}", start + 1, end, list.len)
    };
    let border = if list.focused {
        theme.title()
    } else {
        theme.dim()
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(border)
        .title(Line::styled(format!(" {} ", list.title), theme.title()))
        .title_bottom(Line::styled(format!(" {shown} "), theme.dim()).right_aligned());
    let header = Row::new(list.header.iter().map(|h| Cell::from(*h))).style(theme.header_row());
    let table = Table::new(rows, list.widths.to_vec())
        .header(header)
        .block(block)
        .column_spacing(1);
    f.render_widget(table, area);
}

#[cfg(test)]
mod tests {
    use super::offset;

    #[test]
    fn selection_stays_on_screen() {
        assert_eq!(offset(0, 10), 0);
        assert_eq!(offset(9, 10), 0);
        assert_eq!(offset(10, 10), 1);
        assert_eq!(offset(99, 10), 90);
        assert_eq!(offset(5, 0), 0);
    }
}
