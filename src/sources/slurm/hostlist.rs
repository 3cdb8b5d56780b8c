//! Slurm hostlist expressions: `gpu[01-04,07]`, `a[1-2]b[3-4]`, `n1,n2`.

/// Expands a hostlist into host names, in order. Zero padding of a range's
/// first number is kept (`gpu[01-03]` → gpu01 gpu02 gpu03).
pub fn expand(expr: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for part in split_top(expr) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        out.extend(expand_one(part)?);
    }
    Ok(out)
}

/// Splits on commas outside brackets.
fn split_top(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn expand_one(s: &str) -> Result<Vec<String>, String> {
    let Some(open) = s.find('[') else {
        return Ok(vec![s.to_string()]);
    };
    let close = s[open..]
        .find(']')
        .map(|c| open + c)
        .ok_or_else(|| format!("unclosed '[' in hostlist {s:?}"))?;
    let (prefix, body, rest) = (&s[..open], &s[open + 1..close], &s[close + 1..]);
    let tails = expand_one(rest)?;
    let mut out = Vec::new();
    for range in body.split(',') {
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (range.trim(), range.trim()),
        };
        let width = lo.len();
        let a: u64 = lo
            .parse()
            .map_err(|_| format!("bad range {range:?} in hostlist {s:?}"))?;
        let b: u64 = hi
            .parse()
            .map_err(|_| format!("bad range {range:?} in hostlist {s:?}"))?;
        if b < a || b - a > 100_000 {
            return Err(format!("bad range {range:?} in hostlist {s:?}"));
        }
        for n in a..=b {
            for t in &tails {
                out.push(format!("{prefix}{n:0width$}{t}"));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::expand;

    #[test]
    fn expands_ranges_lists_and_padding() {
        assert_eq!(
            expand("gpu[01-04,07]").expect("ok"),
            ["gpu01", "gpu02", "gpu03", "gpu04", "gpu07"]
        );
        assert_eq!(expand("gpu01").expect("ok"), ["gpu01"]);
        assert_eq!(expand("a1,b[2-3]").expect("ok"), ["a1", "b2", "b3"]);
        assert_eq!(
            expand("r[1-2]n[1-2]").expect("ok"),
            ["r1n1", "r1n2", "r2n1", "r2n2"]
        );
        assert_eq!(expand("").expect("ok"), Vec::<String>::new());
        assert!(expand("gpu[01-").is_err());
        assert!(expand("gpu[04-01]").is_err());
    }
}
