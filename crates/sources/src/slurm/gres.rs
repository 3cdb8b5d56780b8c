//! GPU counts and indices from Slurm's GRES strings.

/// A parsed GPU GRES: `gpu:h100:8(IDX:0-3,6)` → type h100, count 8,
/// indices 0,1,2,3,6. Other GRES kinds in a comma list are skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuGres {
    pub model: Option<String>,
    pub count: u32,
    /// `None` when the string carries no index list (or `IDX:N/A`).
    pub indices: Option<Vec<u32>>,
}

/// Parses the GPU part of a GRES string such as `gpu:h100:8(S:0-1)`,
/// `gpu:8`, `gpu:h100:8(IDX:0-7),nic:1`, or `gres/gpu:h100=8`.
pub fn parse(s: &str) -> Option<GpuGres> {
    let mut found: Option<GpuGres> = None;
    for item in split_items(s) {
        let item = item.trim();
        let item = item
            .strip_prefix("gres/")
            .or_else(|| item.strip_prefix("gres:"))
            .unwrap_or(item);
        let (head, paren) = match item.find('(') {
            Some(i) => (&item[..i], Some(item[i + 1..].trim_end_matches(')'))),
            None => (item, None),
        };
        let fields: Vec<&str> = head.split([':', '=']).collect();
        if fields.first() != Some(&"gpu") {
            continue;
        }
        let (model, count) = match fields.as_slice() {
            ["gpu"] => (None, 1),
            ["gpu", n] if n.parse::<u32>().is_ok() => (None, n.parse().unwrap_or(0)),
            ["gpu", m] => (Some(m.to_string()), 1),
            ["gpu", m, n, ..] => (Some(m.to_string()), n.parse().unwrap_or(0)),
            _ => continue,
        };
        let indices = paren
            .and_then(|p| p.split_once("IDX:"))
            .and_then(|(_, idx)| parse_indices(idx));
        let g = found.get_or_insert_with(GpuGres::default);
        g.count = g.count.saturating_add(count);
        if g.model.is_none() {
            g.model = model;
        }
        if let Some(ix) = indices {
            g.indices.get_or_insert_with(Vec::new).extend(ix);
        }
    }
    found
}

/// Splits on commas outside parentheses.
fn split_items(s: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&s[start..]);
    items
}

/// `0-3,6` → [0,1,2,3,6]; `N/A` → None.
fn parse_indices(s: &str) -> Option<Vec<u32>> {
    let s = s.trim().trim_end_matches(')');
    if s.eq_ignore_ascii_case("N/A") || s.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 1024 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

/// GPUs in a TRES request such as `gres:gpu:8`, `gres:gpu:h100:8`,
/// `gres/gpu=16`, `gres/gpu:h100=4`.
pub fn tres_gpus(s: &str) -> Option<u32> {
    s.split(',').find_map(|item| {
        let item = item.trim();
        let rest = item
            .strip_prefix("gres:gpu")
            .or_else(|| item.strip_prefix("gres/gpu"))
            .or_else(|| item.strip_prefix("gpu"))?;
        let n = rest.rsplit([':', '=']).next()?;
        if rest.is_empty() {
            return Some(1);
        }
        n.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gres_strings() {
        let g = parse("gpu:h100:8(IDX:0-3,6)").expect("gpu");
        assert_eq!(g.model.as_deref(), Some("h100"));
        assert_eq!(g.count, 8);
        assert_eq!(g.indices, Some(vec![0, 1, 2, 3, 6]));
        let g = parse("gpu:h100:8(S:0-1)").expect("gpu");
        assert_eq!((g.count, g.indices), (8, None));
        assert_eq!(parse("gpu:h100:0(IDX:N/A)").expect("gpu").indices, None);
        assert_eq!(parse("gpu:4").expect("gpu").count, 4);
        assert_eq!(parse("nic:1,gpu:a100:2(IDX:0-1)").expect("gpu").count, 2);
        assert_eq!(parse("gres/gpu:h100=8").expect("gpu").count, 8);
        assert_eq!(parse("(null)"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn tres_requests() {
        assert_eq!(tres_gpus("gres:gpu:8"), Some(8));
        assert_eq!(tres_gpus("gres:gpu:h100:8"), Some(8));
        assert_eq!(tres_gpus("gres/gpu=16"), Some(16));
        assert_eq!(tres_gpus("gres/gpu:h100=4"), Some(4));
        assert_eq!(tres_gpus("cpu=4,gres/gpu=2"), Some(2));
        assert_eq!(tres_gpus(""), None);
        assert_eq!(tres_gpus("cpu=8"), None);
    }
}
