//! Fitting columns to a width, sorting rows by a column, filtering rows.

use super::{Column, Ctx, Key};

// ---- layout ---------------------------------------------------------------

/// A fill column (a free-text status) is content at this width; wider is a
/// bonus, not a reason to drop another column.
const FILL_ENOUGH: u16 = 40;

/// Column widths for a table `width` wide; `natural` is each column's widest
/// content (header included) among the rows shown. Columns are dropped,
/// least important first, until the rest fit at their minimum *and* no
/// column is cut short while a less important one is shown — a name is
/// never cut to keep a temperature. Spare width then goes to columns in
/// priority order, each up to what its content needs (and its maximum), and
/// what is left to the fill column. `None`: dropped.
pub fn layout<T: ?Sized>(cols: &[Column<T>], natural: &[u16], width: u16) -> Vec<Option<u16>> {
    let mut shown: Vec<bool> = vec![true; cols.len()];
    loop {
        let w = widths(cols, natural, width, &shown);
        let fits = fits(cols, &shown, width);
        // The most important column left short of what it needs.
        let short = (0..cols.len())
            .filter(|&i| shown[i])
            .filter(|&i| {
                let hi = cols[i].max.max(cols[i].min);
                let cap = if cols[i].fill {
                    FILL_ENOUGH.min(hi)
                } else {
                    hi
                };
                let need = natural.get(i).copied().unwrap_or(0).clamp(cols[i].min, cap);
                w[i] < need
            })
            .map(|i| cols[i].priority)
            .min();
        // The least important shown column, the rightmost of equals, that
        // matters less than what is short (or anything, when it does not fit).
        let drop = (0..cols.len())
            .filter(|&i| shown[i] && cols[i].priority > 0)
            .filter(|&i| !fits || short.is_some_and(|p| cols[i].priority > p))
            .max_by_key(|&i| (cols[i].priority, i));
        match drop {
            Some(d) if !fits || short.is_some() => shown[d] = false,
            _ => return (0..cols.len()).map(|i| shown[i].then_some(w[i])).collect(),
        }
    }
}

fn fits<T: ?Sized>(cols: &[Column<T>], shown: &[bool], width: u16) -> bool {
    let n = shown.iter().filter(|&&s| s).count() as u32;
    let need: u32 = cols
        .iter()
        .zip(shown)
        .filter(|(_, s)| **s)
        .map(|(c, _)| u32::from(c.min))
        .sum::<u32>()
        + n.saturating_sub(1);
    need <= u32::from(width)
}

/// Widths of the shown columns: minimums, then spare width by priority.
fn widths<T: ?Sized>(cols: &[Column<T>], natural: &[u16], width: u16, shown: &[bool]) -> Vec<u16> {
    let n = shown.iter().filter(|&&s| s).count() as u32;
    let mut w: Vec<u16> = cols.iter().map(|c| c.min).collect();
    let used: u32 = (0..cols.len())
        .filter(|&i| shown[i])
        .map(|i| u32::from(w[i]))
        .sum::<u32>()
        + n.saturating_sub(1);
    let mut spare = u32::from(width).saturating_sub(used);
    let mut order: Vec<usize> = (0..cols.len()).filter(|&i| shown[i]).collect();
    order.sort_by_key(|&i| (cols[i].priority, i));
    for &i in &order {
        // A maximum below the minimum means the minimum.
        let hi = cols[i].max.max(cols[i].min);
        let want = natural.get(i).copied().unwrap_or(0).clamp(cols[i].min, hi);
        let grow = u32::from(want.saturating_sub(w[i])).min(spare);
        w[i] += grow as u16;
        spare -= grow;
    }
    if let Some(fill) = (0..cols.len()).find(|&i| shown[i] && cols[i].fill) {
        w[fill] = w[fill].saturating_add(spare.min(u32::from(u16::MAX)) as u16);
    }
    w
}

/// `text` in at most `width` columns: whole, or cut with `…` — never a
/// prefix that could name another thing.
pub fn fit(text: &str, width: u16) -> String {
    let width = width as usize;
    if text.chars().count() <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = text.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// Rows in a column's order; `reverse` flips it, unknowns stay last.
pub fn sort_rows<T>(ctx: &Ctx, col: &Column<T>, rows: &mut [(usize, &T)], reverse: bool) {
    rows.sort_by(|a, b| {
        let (ka, kb) = ((col.sort)(ctx, a.1), (col.sort)(ctx, b.1));
        let o = match (&ka, &kb) {
            (Key::None, _) | (_, Key::None) => ka.order(&kb),
            _ if reverse => kb.order(&ka),
            _ => ka.order(&kb),
        };
        o.then(a.0.cmp(&b.0))
    });
}

/// Whether a row matches a filter: text on any column (`alice`), the
/// inverse (`!alice`), or a field (`state:pending`, `!state:running`).
pub fn matches<T>(ctx: &Ctx, cols: &[Column<T>], row: &T, filter: &str) -> bool {
    let f = filter.trim();
    if f.is_empty() {
        return true;
    }
    let (negate, f) = match f.strip_prefix('!') {
        Some(rest) => (true, rest.trim()),
        None => (false, f),
    };
    let f = f.to_lowercase();
    let hit = match f.split_once(':') {
        Some((field, value)) if cols.iter().any(|c| field_name(c.name) == field) => cols
            .iter()
            .filter(|c| field_name(c.name) == field)
            .any(|c| (c.cell)(ctx, row).text.to_lowercase().contains(value)),
        _ => cols
            .iter()
            .any(|c| (c.cell)(ctx, row).text.to_lowercase().contains(&f)),
    };
    hit != negate
}

/// A column's name as a filter field: `LAST XID` → `lastxid`,
/// `NODES / REASON` → `reason`, `SM OCC` → `smocc`.
pub fn field_name(name: &str) -> String {
    let n = name.rsplit('/').next().unwrap_or(name);
    n.chars()
        .filter(|c| c.is_alphanumeric())
        .collect::<String>()
        .to_lowercase()
}
