//! A list that draws only the rows that fit: O(visible rows) per frame.

use super::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Row, Table};

/// First row to show so that `selected` is on screen: the app's rule (the
/// mouse hit-tests with it too).
pub use crate::app::first_shown as offset;

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
    let block = frame(&list.title, list.focused, start, end, list.len, theme);
    let header = Row::new(list.header.iter().map(|h| Cell::from(*h))).style(theme.header_row());
    let table = Table::new(rows, list.widths.to_vec())
        .header(header)
        .block(block)
        .column_spacing(1);
    f.render_widget(table, area);
}

/// A list's frame: its title, highlighted when it has the keys, and which
/// rows of how many are on screen.
fn frame(
    title: &str,
    focused: bool,
    start: usize,
    end: usize,
    len: usize,
    theme: Theme,
) -> Block<'static> {
    let shown = if len == 0 {
        "empty".to_string()
    } else {
        format!("{}-{} of {}", start + 1, end, len)
    };
    Block::default()
        .borders(Borders::ALL)
        .border_style(if focused { theme.title() } else { theme.dim() })
        .title(Line::styled(format!(" {title} "), theme.title()))
        .title_bottom(Line::styled(format!(" {shown} "), theme.dim()).right_aligned())
}

/// A list drawn from a column specification: the columns that fit (low
/// priority dropped first), widths shared by priority, values cut with `…`,
/// the sort column marked, each sortable column's key (`¹`…`⁹`, `⁰`) in
/// its header. Cells are built only for the visible rows.
pub struct Columns<'a, T: ?Sized> {
    pub title: String,
    pub cols: &'a [crate::columns::Column<T>],
    /// Columns not to show here (a node's own GPU table needs no NODE).
    pub skip: &'a [&'a str],
    pub len: usize,
    pub selected: Option<usize>,
    pub focused: bool,
    pub sort: Option<(usize, bool)>,
    /// Rows to set apart (unread incidents), in bold.
    pub emphasis: Option<&'a dyn Fn(usize) -> bool>,
}

const KEY_MARKS: [&str; 10] = ["¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹", "⁰"];

pub fn draw_columns<'t, T: ?Sized + 't>(
    f: &mut Frame,
    area: Rect,
    theme: Theme,
    ctx: &crate::columns::Ctx,
    list: Columns<T>,
    item: impl Fn(usize) -> Option<&'t T>,
) {
    use crate::columns::{fit, layout};
    let inner_height = area.height.saturating_sub(3) as usize;
    let sel = list.selected.unwrap_or(0).min(list.len.saturating_sub(1));
    let start = offset(sel, inner_height);
    let end = (start + inner_height).min(list.len);
    let cells: Vec<Vec<crate::columns::Cell>> = (start..end)
        .map(|i| {
            item(i).map_or_else(Vec::new, |t| {
                list.cols.iter().map(|c| (c.cell)(ctx, t)).collect()
            })
        })
        .collect();
    let headers: Vec<String> = list
        .cols
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let mark = match list.sort {
                Some((s, false)) if s == k => "▲",
                Some((s, true)) if s == k => "▼",
                _ => "",
            };
            format!(
                "{}{}{mark}",
                c.name,
                KEY_MARKS.get(k).copied().unwrap_or("")
            )
        })
        .collect();
    let natural: Vec<u16> = list
        .cols
        .iter()
        .enumerate()
        .map(|(k, c)| {
            if list.skip.contains(&c.name) {
                return 0;
            }
            let widest = cells
                .iter()
                .filter_map(|r| r.get(k))
                .map(|c| c.text.chars().count())
                .max()
                .unwrap_or(0);
            widest.max(headers[k].chars().count()) as u16
        })
        .collect();
    let inner_w = area.width.saturating_sub(2);
    // Skipped columns take no room: lay out the others only.
    let keep: Vec<usize> = (0..list.cols.len())
        .filter(|&k| !list.skip.contains(&list.cols[k].name))
        .collect();
    let sub: Vec<crate::columns::Column<T>> = keep
        .iter()
        .map(|&k| crate::columns::Column {
            name: list.cols[k].name,
            priority: list.cols[k].priority,
            min: list.cols[k]
                .min
                .max(headers[k].chars().count().min(12) as u16),
            max: list.cols[k]
                .max
                .max(headers[k].chars().count().min(12) as u16),
            fill: list.cols[k].fill,
            cell: list.cols[k].cell,
            sort: list.cols[k].sort,
        })
        .collect();
    let sub_natural: Vec<u16> = keep.iter().map(|&k| natural[k]).collect();
    let widths = layout(&sub, &sub_natural, inner_w);
    let shown: Vec<(usize, u16)> = keep
        .iter()
        .zip(&widths)
        .filter_map(|(&k, w)| w.map(|w| (k, w)))
        .collect();
    let rows: Vec<Row> = cells
        .iter()
        .enumerate()
        .map(|(r, row)| {
            let i = start + r;
            let mut style = Style::default();
            if list.emphasis.is_some_and(|e| e(i)) {
                style = style.add_modifier(ratatui::style::Modifier::BOLD);
            }
            if list.focused && list.selected == Some(i) {
                style = style.patch(theme.selected());
            }
            Row::new(shown.iter().map(|&(k, w)| {
                row.get(k).map_or_else(
                    || Cell::from(""),
                    |c| Cell::from(fit(&c.text, w)).style(theme.tone(c.tone)),
                )
            }))
            .style(style)
        })
        .collect();
    let block = frame(&list.title, list.focused, start, end, list.len, theme);
    let header = Row::new(shown.iter().map(|&(k, w)| Cell::from(fit(&headers[k], w))))
        .style(theme.header_row());
    let widths: Vec<Constraint> = shown.iter().map(|&(_, w)| Constraint::Length(w)).collect();
    let table = Table::new(rows, widths)
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
