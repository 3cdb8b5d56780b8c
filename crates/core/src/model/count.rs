//! A counter that may be unknown, in eight bytes.
//!
//! An `Option<u64>` takes sixteen: a GPU's eight error counters were 128 of
//! its 424 bytes, and a node's eight GPUs fell in mimalloc's 3,584-byte
//! class. At 10,000 nodes the sim and the console hold each node about
//! twice (issue 42: the 10k console's resident memory), so the counters
//! alone were ~10 MB of it. Serialized exactly as `Option<u64>` (a number
//! or `null`), so recordings and JSON output are unchanged.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

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
