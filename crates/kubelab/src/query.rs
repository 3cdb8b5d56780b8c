//! Merge patches and the list queries (`labelSelector`, `fieldSelector`).

use serde_json::{Map, Value};

/// RFC 7386 JSON merge patch.
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// Whether an object passes a `labelSelector` query, by the grammar of
/// the Kubernetes documentation: requirements separated by commas (ANDed;
/// a comma inside `( )` separates a set's values), each one of `key`,
/// `!key`, `key=value`, `key==value`, `key!=value` (also true when the key
/// is absent), `key in (v1, v2)`, `key notin (v1, v2)` (also true when
/// absent). A requirement that cannot be read selects nothing.
pub fn label_query(query: &str, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    requirements(query).iter().all(|term| {
        let term = term.trim();
        let set = |rest: &str| -> Option<Vec<String>> {
            let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
            Some(inner.split(',').map(|v| v.trim().to_string()).collect())
        };
        if let Some((k, rest)) = term.split_once(" notin ") {
            return set(rest)
                .is_some_and(|vs| label(k.trim()).is_none_or(|v| !vs.iter().any(|x| x == v)));
        }
        if let Some((k, rest)) = term.split_once(" in ") {
            return set(rest)
                .is_some_and(|vs| label(k.trim()).is_some_and(|v| vs.iter().any(|x| x == v)));
        }
        if let Some((k, v)) = term.split_once("!=") {
            label(k.trim()) != Some(v.trim())
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            label(k.trim()) == Some(v.trim())
        } else if let Some(k) = term.strip_prefix('!') {
            label(k.trim()).is_none()
        } else {
            !term.contains(char::is_whitespace) && label(term).is_some()
        }
    })
}

/// A query's requirements: split at the commas outside parentheses.
fn requirements(query: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, ch) in query.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&query[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&query[start..]);
    out.into_iter().filter(|t| !t.trim().is_empty()).collect()
}

/// Whether an object passes a `fieldSelector` query (`spec.nodeName=x`,
/// `metadata.name=y`, `status.phase!=Succeeded`, `involvedObject.kind=Pod`).
pub fn field_query(query: &str, o: &Value) -> bool {
    query.split(',').filter(|t| !t.is_empty()).all(|term| {
        let (path, want, negate) = if let Some((p, v)) = term.split_once("!=") {
            (p, v, true)
        } else if let Some((p, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            (p, v, false)
        } else {
            return false;
        };
        let mut cur = o;
        for part in path.trim().split('.') {
            cur = &cur[part];
        }
        let have = match cur {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        };
        (have == want.trim()) != negate
    })
}
