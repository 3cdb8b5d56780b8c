//! What nightshift reads and writes on Kubernetes objects at the lowest
//! level, shared by the map (reading) and the executor (writing): its own
//! annotation and the API's time format. It imports nothing of the source.

use crate::model::Timestamp;
use serde_json::Value;

/// The annotation that carries the reason nightshift (or whoever cordoned
/// through it) gave for taking a node out.
pub const REASON: &str = "nightshift.io/reason";

/// RFC 3339 → epoch seconds.
pub fn time(v: &Value) -> Option<Timestamp> {
    let t = v.as_str()?;
    chrono::DateTime::parse_from_rfc3339(t)
        .ok()
        .map(|d| d.timestamp())
}
