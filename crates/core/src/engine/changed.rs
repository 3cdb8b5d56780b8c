//! What a reader keeps per record of a snapshot's shared lists (its nodes,
//! its jobs), worked out again only for a record that is not the same
//! shared record as last time: at 10,000 nodes a snapshot changes about a
//! tenth of the nodes and a few dozen of 100,000 jobs. The records last
//! seen are held, so a freed one's address is never taken for it.
//!
//! Records are matched by address only, never by reading them: at 100,000
//! jobs, reading each one's id (a hash and two cache misses) cost more
//! than the work it saved. A job that leaves moves every later one up a
//! place (a recording's delta, every second at 10,000 nodes), so a record
//! is looked for a few places around where it was (issue 42).

use std::sync::Arc;

/// How far around its expected place a record is looked for: further
/// back, jobs new in the middle of the list; further ahead, jobs that left
/// before it (dozens a second at 10,000 nodes).
const LOOK_BACK: usize = 16;
const LOOK_AHEAD: usize = 48;

/// For each record of `now`, its place in `last` when it is the same
/// shared record; `None` for one changed or new. The places found only
/// grow, so the lists are walked once each. Only addresses are compared.
pub fn align<T>(last: &[Arc<T>], now: &[Arc<T>]) -> Vec<Option<usize>> {
    let mut out = Vec::with_capacity(now.len());
    // The place after the last record found, and where the next is
    // expected (a changed record moves the expectation on by one).
    let (mut floor, mut next) = (0usize, 0usize);
    // Records missed in a row: past a window's worth (a source that builds
    // every record afresh, as the live pollers do), only the expected
    // place and its neighbours are looked at, until one is found again.
    let mut misses = 0usize;
    for x in now {
        // The record at its expected place (nearly all of them): taken
        // without working out a window.
        if misses == 0 && last.get(next).is_some_and(|l| Arc::ptr_eq(l, x)) {
            out.push(Some(next));
            next += 1;
            floor = next;
            continue;
        }
        let (back, ahead) = if misses > LOOK_AHEAD {
            (1, 2)
        } else {
            (LOOK_BACK, LOOK_AHEAD)
        };
        let from = floor.max(next.saturating_sub(back)).min(last.len());
        let to = last.len().min(next.saturating_add(ahead)).max(from);
        let hit = last
            .get(from..to)
            .unwrap_or_default()
            .iter()
            .position(|l| Arc::ptr_eq(l, x))
            .map(|d| from + d);
        match hit {
            Some(m) => {
                floor = m + 1;
                next = m + 1;
                misses = 0;
            }
            None => {
                next += 1;
                misses += 1;
            }
        }
        out.push(hit);
    }
    out
}

/// Whether no record found is before its own place (what left before it
/// outnumbers what came: jobs leave from anywhere and come at the end):
/// the lists can then follow in place (see [`follow`]).
fn forward(places: &[Option<usize>]) -> bool {
    places
        .iter()
        .enumerate()
        .all(|(i, p)| p.is_none_or(|m| m >= i))
}

/// `slots`, one per record held, made one per record of `now` in place,
/// for [`forward`] places: the slot of a record found at `m` is moved to
/// its new place (what it passes over is no record's any more and moves
/// on ahead); a record not found gets `make(record, what was there)`, and
/// what was there goes to `replaced` with that place. The slots past the
/// new list's end, handed back. A walk of the lists without a new one: at
/// 100,000 jobs a new list and its old one's free were most of the time
/// (issue 42, measured with perf).
fn follow<R, X>(
    slots: &mut Vec<X>,
    now: &[R],
    places: &[Option<usize>],
    mut make: impl FnMut(&R, Option<&X>) -> X,
    mut replaced: impl FnMut(usize, X),
) -> Vec<X> {
    for (i, (x, p)) in now.iter().zip(places).enumerate() {
        match (*p, slots.len()) {
            (Some(m), len) if m == i && i < len => {}
            (Some(m), len) if m > i && m < len => slots.swap(i, m),
            (_, len) if i < len => {
                if let Some(slot) = slots.get_mut(i) {
                    let new = make(x, Some(slot));
                    replaced(i, std::mem::replace(slot, new));
                }
            }
            _ => {
                let new = make(x, None);
                slots.push(new);
            }
        }
    }
    if slots.len() > now.len() {
        slots.split_off(now.len())
    } else {
        Vec::new()
    }
}

/// The list `now`, held as `last`, and each record's place in what was
/// held before (see [`align`]): the records found stay or are moved, not
/// copied (no reference count touched), the rest are cloned. The records
/// let go go to `gone`, each with a place (see [`sync`]).
fn rehold<T>(
    last: &mut Vec<Arc<T>>,
    now: &[Arc<T>],
    mut gone: impl FnMut(usize, Arc<T>),
) -> Vec<Option<usize>> {
    let places = align(last, now);
    if forward(&places) {
        let left = follow(last, now, &places, |x, _| Arc::clone(x), &mut gone);
        for (k, x) in left.into_iter().enumerate() {
            gone(now.len() + k, x);
        }
        return places;
    }
    let mut old = std::mem::take(last).into_iter();
    let mut at = 0usize;
    last.reserve(now.len());
    for (x, p) in now.iter().zip(&places) {
        let mut moved = None;
        if let Some(m) = *p {
            while at < m {
                if let Some(x) = old.next() {
                    gone(at, x);
                }
                at += 1;
            }
            moved = old.next();
            at += 1;
        }
        last.push(moved.unwrap_or_else(|| Arc::clone(x)));
    }
    for (k, x) in old.enumerate() {
        gone(at + k, x);
    }
    places
}

/// `last` made the list `now` record by record (see [`rehold`]): what
/// stayed is not copied. Each record let go goes to `gone` with a place:
/// in a list whose records keep their places (a cluster's nodes), the one
/// it was held at; where records moved, only near it.
pub fn sync<T>(last: &mut Vec<Arc<T>>, now: &[Arc<T>], gone: impl FnMut(usize, Arc<T>)) {
    rehold(last, now, gone);
}

/// The records of a list last seen, to tell which of the next list's are
/// new or changed.
#[derive(Debug, Clone)]
pub struct Held<T> {
    last: Vec<Arc<T>>,
}

impl<T> Default for Held<T> {
    fn default() -> Self {
        Held { last: Vec::new() }
    }
}

impl<T> Held<T> {
    /// Takes in the list `now`; `f` hears of each record (by its place in
    /// `now`) that is not the same shared record as one held.
    pub fn update(&mut self, now: &[Arc<T>], mut f: impl FnMut(usize)) {
        for (i, p) in rehold(&mut self.last, now, |_, _| {})
            .into_iter()
            .enumerate()
        {
            if p.is_none() {
                f(i);
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct PerRecord<T, P> {
    last: Vec<Arc<T>>,
    parts: Vec<P>,
}

impl<T, P> Default for PerRecord<T, P> {
    fn default() -> Self {
        PerRecord {
            last: Vec::new(),
            parts: Vec::new(),
        }
    }
}

impl<T, P: Default> PerRecord<T, P> {
    /// Takes in the list `now`: `f` works out the part of each record that
    /// changed or is new; the others keep theirs, moved with the record.
    pub fn update(&mut self, now: &[Arc<T>], f: impl FnMut(&T) -> P) {
        self.update_each(now, f, |_, _| {});
    }

    /// [`PerRecord::update`], and `told` hears of each part that goes or
    /// comes: (the old part, the new part), for a reader that keeps sums
    /// over the parts up to date without reading them all.
    pub fn update_each(
        &mut self,
        now: &[Arc<T>],
        mut f: impl FnMut(&T) -> P,
        mut told: impl FnMut(Option<&P>, Option<&P>),
    ) {
        let places = rehold(&mut self.last, now, |_, _| {});
        if forward(&places) {
            let make = |x: &Arc<T>, old: Option<&P>| {
                let new = f(x);
                told(old, Some(&new));
                new
            };
            for gone in follow(&mut self.parts, now, &places, make, |_, _| {}) {
                told(Some(&gone), None);
            }
            return;
        }
        let mut old = std::mem::take(&mut self.parts);
        let mut kept = vec![false; old.len()];
        self.parts.reserve(now.len());
        for (x, p) in now.iter().zip(places) {
            let part = match p.and_then(|m| Some((m, old.get_mut(m)?))) {
                Some((m, part)) => {
                    if let Some(k) = kept.get_mut(m) {
                        *k = true;
                    }
                    std::mem::take(part)
                }
                None => {
                    let new = f(x);
                    told(None, Some(&new));
                    new
                }
            };
            self.parts.push(part);
        }
        for (gone, _) in old.iter().zip(&kept).filter(|(_, k)| !**k) {
            told(Some(gone), None);
        }
    }

    /// Each record's part, in the list's order.
    pub fn parts(&self) -> &[P] {
        &self.parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record changed, one gone, one come: only those are worked out
    /// again, and the parts follow the list.
    #[test]
    fn only_changed_records_are_worked_out_again() {
        let (a, b, c) = (Arc::new(1), Arc::new(2), Arc::new(3));
        let mut p = PerRecord::default();
        let mut seen = Vec::new();
        p.update(&[a.clone(), b.clone()], |x| {
            seen.push(*x);
            x * 10
        });
        assert_eq!(p.parts(), [10, 20]);
        let b2 = Arc::new(5);
        p.update(&[a.clone(), b2, c], |x| {
            seen.push(*x);
            x * 10
        });
        assert_eq!(p.parts(), [10, 50, 30]);
        assert_eq!(seen, [1, 2, 5, 3], "a was not worked out again");
        p.update(&[a], |x| x * 10);
        assert_eq!(p.parts(), [10]);
    }

    /// Records that left move the later ones up; one new in the middle,
    /// one changed in place: only the new and the changed are worked out
    /// again, and the parts follow the list.
    #[test]
    fn records_moved_up_or_past_a_new_one_are_not_worked_out_again() {
        let xs: Vec<Arc<u32>> = (0..200).map(Arc::new).collect();
        let mut p = PerRecord::default();
        p.update(&xs, |x| x * 10);
        // 5 and 100..=130 leave, 7 changes, 999 comes at 50, 1000 at the end.
        let mut now: Vec<Arc<u32>> = Vec::new();
        for (i, x) in xs.iter().enumerate() {
            match i {
                5 | 100..=130 => {}
                7 => now.push(Arc::new(7000)),
                50 => {
                    now.push(Arc::new(999));
                    now.push(x.clone());
                }
                _ => now.push(x.clone()),
            }
        }
        now.push(Arc::new(1000));
        let mut seen = Vec::new();
        p.update(&now, |x| {
            seen.push(*x);
            x * 10
        });
        assert_eq!(seen, [7000, 999, 1000]);
        let want: Vec<u32> = now.iter().map(|x| **x * 10).collect();
        assert_eq!(p.parts(), want.as_slice());
        // Held: the same records tell the same.
        let mut h = Held::default();
        h.update(&xs, |_| {});
        let mut told = Vec::new();
        h.update(&now, |i| told.push(*now[i]));
        assert_eq!(told, [7000, 999, 1000]);
        h.update(&now, |i| panic!("{i} is the same record"));
    }

    /// After a long run of changed records, the records that stayed are
    /// found again at their places.
    #[test]
    fn records_after_a_long_run_of_changed_ones_are_found_again() {
        let xs: Vec<Arc<u32>> = (0..300).map(Arc::new).collect();
        let now: Vec<Arc<u32>> = xs
            .iter()
            .enumerate()
            .map(|(i, x)| {
                if i < 200 {
                    Arc::new(**x + 1000)
                } else {
                    x.clone()
                }
            })
            .collect();
        let places = align(&xs, &now);
        assert!(places[..200].iter().all(Option::is_none));
        assert!(
            places[200..]
                .iter()
                .enumerate()
                .all(|(k, p)| *p == Some(200 + k))
        );
    }

    /// A list of all new records (a source that builds every record
    /// afresh): each is worked out, none matched to another's place.
    #[test]
    fn a_list_of_new_records_is_worked_out_whole() {
        let xs: Vec<Arc<u32>> = (0..100).map(Arc::new).collect();
        let ys: Vec<Arc<u32>> = (0..100).map(|i| Arc::new(i + 1)).collect();
        assert!(align(&xs, &ys).iter().all(Option::is_none));
        let mut p = PerRecord::default();
        p.update(&xs, |x| *x);
        p.update(&ys, |x| *x);
        assert_eq!(p.parts(), (1..=100).collect::<Vec<u32>>().as_slice());
    }

    /// `sync` makes the held list the new one, sharing its records, and
    /// hands back exactly the records let go: in place (each with the
    /// place it was held at), and with records moved up.
    #[test]
    fn sync_shares_the_new_list_and_lets_go_of_the_rest() {
        let xs: Vec<Arc<u32>> = (0..100).map(Arc::new).collect();
        for (in_place, now) in [true, false].into_iter().zip([
            // In place: one changed, the list shorter.
            xs.iter()
                .take(90)
                .enumerate()
                .map(|(i, x)| if i == 7 { Arc::new(700) } else { x.clone() })
                .collect::<Vec<_>>(),
            // Moved up: two left, one new at the end.
            xs.iter()
                .enumerate()
                .filter(|(i, _)| *i != 3 && *i != 40)
                .map(|(_, x)| x.clone())
                .chain([Arc::new(1000)])
                .collect(),
        ]) {
            let mut held = xs.clone();
            let mut gone = Vec::new();
            sync(&mut held, &now, |at, x| {
                assert!(!in_place || Arc::ptr_eq(&xs[at], &x), "{at}");
                gone.push(*x);
            });
            assert!(held.iter().zip(&now).all(|(a, b)| Arc::ptr_eq(a, b)));
            assert_eq!(held.len(), now.len());
            let mut want: Vec<u32> = xs
                .iter()
                .filter(|x| !now.iter().any(|n| Arc::ptr_eq(n, x)))
                .map(|x| **x)
                .collect();
            gone.sort_unstable();
            want.sort_unstable();
            assert_eq!(gone, want);
        }
    }

    /// Lists edited at random places (records leaving, coming anywhere,
    /// changing), round after round: the parts always follow the list,
    /// and a sum kept from what `told` says is the parts' sum, whether the
    /// lists followed in place or were rebuilt.
    #[test]
    fn parts_and_sums_told_follow_any_edits() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n.max(1) as u64) as usize
        };
        let mut next = 0u64;
        let mut fresh = || {
            next += 1;
            Arc::new(next)
        };
        let mut list: Vec<Arc<u64>> = (0..300).map(|_| fresh()).collect();
        let mut p: PerRecord<u64, u64> = PerRecord::default();
        let mut held = Held::default();
        let mut sum: u64 = list.iter().map(|x| **x).sum();
        p.update(&list, |x| *x);
        held.update(&list, |_| {});
        let (mut forward_rounds, mut rebuilt_rounds) = (0, 0);
        for round in 0..300 {
            let before = list.clone();
            for _ in 0..rand(6) {
                if !list.is_empty() {
                    list.remove(rand(list.len()));
                }
            }
            // Some rounds add more at the front than leave: rebuilt.
            let comes = if round % 3 == 0 { rand(8) } else { rand(2) };
            for _ in 0..comes {
                let at = if round % 2 == 0 {
                    rand(list.len() + 1)
                } else {
                    list.len()
                };
                list.insert(at, fresh());
            }
            for _ in 0..rand(4) {
                if !list.is_empty() {
                    let at = rand(list.len());
                    list[at] = fresh();
                }
            }
            if forward(&align(&before, &list)) {
                forward_rounds += 1;
            } else {
                rebuilt_rounds += 1;
            }
            let mut worked = Vec::new();
            p.update_each(
                &list,
                |x| {
                    worked.push(*x);
                    *x
                },
                |old, new| {
                    sum -= old.copied().unwrap_or(0);
                    sum += new.copied().unwrap_or(0);
                },
            );
            let want: Vec<u64> = list.iter().map(|x| **x).collect();
            assert_eq!(p.parts(), want.as_slice(), "round {round}");
            assert_eq!(sum, want.iter().sum::<u64>(), "round {round}");
            // Only records not in the list before were worked out.
            assert!(worked.iter().all(|w| !before.iter().any(|b| **b == *w)));
            let mut told = Vec::new();
            held.update(&list, |i| told.push(*list[i]));
            assert_eq!(worked.len(), told.len(), "round {round}");
        }
        assert!(
            forward_rounds > 50 && rebuilt_rounds > 20,
            "{forward_rounds} {rebuilt_rounds}"
        );
    }
}
