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
    /// A known count (`v + 1`, never zero, is what it keeps).
    pub fn of(v: u64) -> Count {
        Count(std::num::NonZeroU64::new(v.saturating_add(1)))
    }

    /// The count, `None` when unknown.
    pub fn get(self) -> Option<u64> {
        self.0.map(|v| v.get() - 1)
    }
}

/// A time (`Timestamp`, seconds since the epoch) or unknown. The one value
/// it cannot hold, `i64::MIN`, reads as `i64::MIN + 1`: no clock says it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct When(Option<std::num::NonZeroU64>);

impl When {
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
}

/// What both are besides their encoding: unknown by default, ordered as
/// their `Option` is (unknown first), compared with it, converted to and
/// from it, and printed, written and read as it.
macro_rules! as_option {
    ($t:ident, $v:ty) => {
        impl $t {
            /// Unknown.
            pub const UNKNOWN: $t = $t(None);

            pub fn is_some(self) -> bool {
                self.0.is_some()
            }

            pub fn is_none(self) -> bool {
                self.0.is_none()
            }

            pub fn unwrap_or(self, default: $v) -> $v {
                self.get().unwrap_or(default)
            }
        }

        impl PartialOrd for $t {
            fn partial_cmp(&self, other: &$t) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }

        impl Ord for $t {
            fn cmp(&self, other: &$t) -> std::cmp::Ordering {
                self.get().cmp(&other.get())
            }
        }

        impl From<Option<$v>> for $t {
            fn from(v: Option<$v>) -> $t {
                v.map_or($t::UNKNOWN, $t::of)
            }
        }

        impl From<$v> for $t {
            fn from(v: $v) -> $t {
                $t::of(v)
            }
        }

        impl From<$t> for Option<$v> {
            fn from(c: $t) -> Option<$v> {
                c.get()
            }
        }

        impl PartialEq<Option<$v>> for $t {
            fn eq(&self, other: &Option<$v>) -> bool {
                self.get() == *other
            }
        }

        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.get().fmt(f)
            }
        }

        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.get().serialize(s)
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                Option::<$v>::deserialize(d).map($t::from)
            }
        }
    };
}

as_option!(Count, u64);
as_option!(When, Timestamp);

/// One shared copy of each name handed out (a team's, a QOS's, a
/// partition's): a cluster has a few dozen, and 100,000 jobs or a day of
/// starts would otherwise each hold their own.
#[derive(Debug, Clone, Default)]
pub struct Names(std::collections::HashSet<std::sync::Arc<str>>);

impl Names {
    /// The one copy of `name`.
    pub fn get(&mut self, name: &str) -> std::sync::Arc<str> {
        if let Some(n) = self.0.get(name) {
            return n.clone();
        }
        let n: std::sync::Arc<str> = name.into();
        self.0.insert(n.clone());
        n
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
    }

    /// `c`, made from `v`, is written as `v` is and read back from it.
    fn written_as<C, V>(v: Option<V>)
    where
        C: From<Option<V>> + Serialize + serde::de::DeserializeOwned + PartialEq + fmt::Debug,
        V: Serialize + Copy,
    {
        let c = C::from(v);
        let text = serde_json::to_string(&v).unwrap();
        assert_eq!(serde_json::to_string(&c).unwrap(), text);
        assert_eq!(serde_json::from_str::<C>(&text).unwrap(), c);
    }

    #[test]
    fn both_are_written_and_read_as_an_option() {
        for v in [None, Some(0), Some(7), Some(u64::MAX - 1)] {
            written_as::<Count, u64>(v);
        }
        for t in [None, Some(-5), Some(0), Some(1_796_000_000)] {
            written_as::<When, Timestamp>(t);
        }
    }

    #[test]
    fn names_hand_out_one_copy_of_each_name() {
        let mut names = Names::default();
        let a = names.get("ml-research");
        let b = names.get(&String::from("ml-research"));
        let c = names.get("normal");
        assert!(std::sync::Arc::ptr_eq(&a, &b));
        assert!(!std::sync::Arc::ptr_eq(&a, &c));
        assert_eq!((&*a, &*c), ("ml-research", "normal"));
    }
}
