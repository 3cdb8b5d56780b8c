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

/// Whether an object passes a `labelSelector` query (`a=b,c!=d,e,!f`).
pub fn label_query(query: &str, labels: &Value) -> bool {
    query.split(',').filter(|t| !t.is_empty()).all(|term| {
        let label = |k: &str| labels.get(k.trim()).and_then(Value::as_str);
        if let Some((k, v)) = term.split_once("!=") {
            label(k) != Some(v.trim())
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            label(k) == Some(v.trim())
        } else if let Some(k) = term.strip_prefix('!') {
            label(k).is_none()
        } else {
            label(term).is_some()
        }
    })
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
