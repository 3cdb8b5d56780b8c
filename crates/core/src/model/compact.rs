//! A count or a time that may be unknown, in eight bytes.
//!
//! An `Option<u64>` or `Option<i64>` takes sixteen. A GPU's eight error
//! counters were 128 of its 424 bytes (a node's eight GPUs fell in
//! mimalloc's 3,584-byte class), and a job's nine optional numbers 144 of
//! its 488 (100,000 jobs in the 512-byte class): issue 42, the 10k
//! console's resident memory. Each is serialized exactly as the `Option`
//! it replaces (a number or `null`), so recordings and JSON output are
//! unchanged.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

use super::Timestamp;

/// A count or unknown. The one value it cannot hold, `u64::MAX`, reads as
/// `u64::MAX - 1`: no error counter gets there, and a scrape that says so
/// is still far past any threshold.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Count(Option<std::num::NonZeroU64>);

impl Count {
    /// Unknown.
    pub const UNKNOWN: Count = Count(None);

    /// A known count (`v + 1`, never zero, is what it keeps).
    pub fn of(v: u64) -> Count {
        Count(std::num::NonZeroU64::new(v.saturating_add(1)))
    }

    /// The count, `None` when unknown.
    pub fn get(self) -> Option<u64> {
        self.0.map(|v| v.get() - 1)
    }

    pub fn is_some(self) -> bool {
        self.0.is_some()
    }

    pub fn is_none(self) -> bool {
        self.0.is_none()
    }

    pub fn unwrap_or(self, default: u64) -> u64 {
        self.get().unwrap_or(default)
    }
}

/// A time (`Timestamp`, seconds since the epoch) or unknown. The one value
/// it cannot hold, `i64::MIN`, reads as `i64::MIN + 1`: no clock says it.
/// Ordered as `Option<Timestamp>` is: unknown first.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct When(Option<std::num::NonZeroU64>);

impl When {
    /// Unknown.
    pub const UNKNOWN: When = When(None);

    /// A known time (kept with its sign bit flipped, never zero).
    pub fn of(t: Timestamp) -> When {
        When(std::num::NonZeroU64::new(
            (t.max(Timestamp::MIN + 1) as u64) ^ (1 << 63),
        ))
    }

    /// The time, `None` when unknown.
    pub fn get(self) -> Option<Timestamp> {
        self.0.map(|v| (v.get() ^ (1 << 63)) as Timestamp)
    }

    pub fn is_some(self) -> bool {
        self.0.is_some()
    }

    pub fn is_none(self) -> bool {
        self.0.is_none()
    }

    pub fn unwrap_or(self, default: Timestamp) -> Timestamp {
        self.get().unwrap_or(default)
    }
}

impl PartialOrd for When {
    fn partial_cmp(&self, other: &When) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for When {
    fn cmp(&self, other: &When) -> std::cmp::Ordering {
        self.get().cmp(&other.get())
    }
}

impl From<Option<Timestamp>> for When {
    fn from(t: Option<Timestamp>) -> When {
        t.map_or(When::UNKNOWN, When::of)
    }
}

impl From<Timestamp> for When {
    fn from(t: Timestamp) -> When {
        When::of(t)
    }
}

impl From<When> for Option<Timestamp> {
    fn from(w: When) -> Option<Timestamp> {
        w.get()
    }
}

impl PartialEq<Option<Timestamp>> for When {
    fn eq(&self, other: &Option<Timestamp>) -> bool {
        self.get() == *other
    }
}

impl fmt::Debug for When {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
    }
}

impl Serialize for When {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(s)
    }
}

impl<'de> Deserialize<'de> for When {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<When, D::Error> {
        Option::<Timestamp>::deserialize(d).map(When::from)
    }
}

impl PartialOrd for Count {
    fn partial_cmp(&self, other: &Count) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Ordered as `Option<u64>` is: unknown first.
impl Ord for Count {
    fn cmp(&self, other: &Count) -> std::cmp::Ordering {
        self.get().cmp(&other.get())
    }
}

impl From<Option<u64>> for Count {
    fn from(v: Option<u64>) -> Count {
        v.map_or(Count::UNKNOWN, Count::of)
    }
}

impl From<u64> for Count {
    fn from(v: u64) -> Count {
        Count::of(v)
    }
}

impl From<Count> for Option<u64> {
    fn from(c: Count) -> Option<u64> {
        c.get()
    }
}

impl PartialEq<Option<u64>> for Count {
    fn eq(&self, other: &Option<u64>) -> bool {
        self.get() == *other
    }
}

impl fmt::Debug for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
    }
}

impl Serialize for Count {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Count, D::Error> {
        Option::<u64>::deserialize(d).map(Count::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_reads_back_what_it_was_given() {
        for v in [0, 1, 2, 41, u32::MAX as u64, u64::MAX - 2, u64::MAX - 1] {
            assert_eq!(Count::of(v).get(), Some(v));
        }
        assert_eq!(Count::UNKNOWN.get(), None);
        assert_eq!(Count::default().get(), None);
        assert_eq!(Count::from(None).get(), None);
        // The one value it cannot hold is kept as a count, one less.
        assert_eq!(Count::of(u64::MAX).get(), Some(u64::MAX - 1));
        assert_eq!(std::mem::size_of::<Count>(), 8);
    }

    #[test]
    fn a_time_reads_back_what_it_was_given_and_orders_as_an_option() {
        let times = [Timestamp::MIN + 1, -1, 0, 1, 1_796_000_000, Timestamp::MAX];
        for t in times {
            assert_eq!(When::of(t).get(), Some(t));
        }
        assert_eq!(When::of(Timestamp::MIN).get(), Some(Timestamp::MIN + 1));
        assert_eq!(When::default().get(), None);
        let mut sorted: Vec<When> = times.iter().rev().map(|&t| When::of(t)).collect();
        sorted.push(When::UNKNOWN);
        sorted.sort();
        let back: Vec<Option<Timestamp>> = sorted.iter().map(|w| w.get()).collect();
        let mut want: Vec<Option<Timestamp>> = times.iter().map(|&t| Some(t)).collect();
        want.insert(0, None);
        assert_eq!(back, want);
        assert_eq!(std::mem::size_of::<When>(), 8);
        for t in [None, Some(-5), Some(0), Some(1_796_000_000)] {
            let w = When::from(t);
            assert_eq!(
                serde_json::to_string(&w).ok(),
                serde_json::to_string(&t).ok()
            );
            let read: When = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
            assert_eq!(read, w);
        }
    }

    #[test]
    fn it_is_written_and_read_as_an_option() {
        for v in [None, Some(0), Some(7), Some(u64::MAX - 1)] {
            let c = Count::from(v);
            assert_eq!(
                serde_json::to_string(&c).ok(),
                serde_json::to_string(&v).ok()
            );
            let back: Count = serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
            assert_eq!(back, c);
        }
    }
}
