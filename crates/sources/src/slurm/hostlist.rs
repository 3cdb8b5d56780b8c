//! Slurm hostlist expressions: `gpu[01-04,07]`, `a[1-2]b[3-4]`, `n1,n2`.
use crate::error::{Invalid, invalid};

/// Expands a hostlist into host names, in order. Zero padding of a range's
/// first number is kept (`gpu[01-03]` → gpu01 gpu02 gpu03).
/// Expansion stops at `limits.max_hosts_per_list` names: nested ranges
/// (`a[0-99999]b[0-99999]`) multiply, and a hostile or broken answer must
/// not exhaust memory.
pub fn expand(expr: &str) -> Result<Vec<String>, Invalid> {
    let max = crate::limits::get().max_hosts_per_list;
    let mut out = Vec::new();
    for part in split_top(expr) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        // Count before building: the product of the ranges' sizes.
        let n = count_one(part)?;
        if n.saturating_add(out.len() as u64) > max {
            return Err(invalid!(
                "hostlist {:?} names more than {max} hosts (limits.max_hosts_per_list)",
                crate::text::one_line(expr, 60)
            ));
        }
        out.extend(expand_one(part)?);
    }
    Ok(out)
}

/// How many names `s` expands to, without building them.
fn count_one(s: &str) -> Result<u64, Invalid> {
    let Some(open) = s.find('[') else {
        return Ok(1);
    };
    let close = s[open..]
        .find(']')
        .map(|c| open + c)
        .ok_or_else(|| invalid!("unclosed '[' in hostlist {s:?}"))?;
    let mut here: u64 = 0;
    for range in s[open + 1..close].split(',') {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let (a, b): (u64, u64) = match (lo.trim().parse(), hi.trim().parse()) {
            (Ok(a), Ok(b)) if b >= a => (a, b),
            _ => return Err(invalid!("bad range {range:?} in hostlist {s:?}")),
        };
        here = here.saturating_add(b - a + 1);
    }
    Ok(here.saturating_mul(count_one(&s[close + 1..])?))
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

fn expand_one(s: &str) -> Result<Vec<String>, Invalid> {
    let Some(open) = s.find('[') else {
        return Ok(vec![s.to_string()]);
    };
    let close = s[open..]
        .find(']')
        .map(|c| open + c)
        .ok_or_else(|| invalid!("unclosed '[' in hostlist {s:?}"))?;
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
            .map_err(|_| invalid!("bad range {range:?} in hostlist {s:?}"))?;
        let b: u64 = hi
            .parse()
            .map_err(|_| invalid!("bad range {range:?} in hostlist {s:?}"))?;
        if b < a || b - a > 100_000 {
            return Err(invalid!("bad range {range:?} in hostlist {s:?}"));
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

    #[test]
    fn nested_ranges_that_multiply_past_the_limit_are_refused_before_building() {
        // 10^10 names: refused at once, naming the key, without allocating.
        let err = expand("a[0-99999]b[0-99999]").expect_err("too many");
        assert!(err.0.contains("limits.max_hosts_per_list"), "{err}");
        let err = expand("a[0-1048576]").expect_err("one over");
        assert!(err.0.contains("limits.max_hosts_per_list"), "{err}");
        assert_eq!(expand("a[1-1000]b[1-1000]").map(|v| v.len()), Ok(1_000_000));
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_counts_what_it_builds(s in "[a-c0-9\\[\\],-]{0,24}") {
            if let Ok(v) = expand(&s) {
                proptest::prop_assert!(v.len() as u64 <= crate::limits::get().max_hosts_per_list);
            }
        }
    }
}
