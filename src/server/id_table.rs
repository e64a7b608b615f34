//! One id shard's table (docs/MATH.md §10.11 step 6,
//! [`IdShards`](super::ingest::IdShards)): per 16-byte `report_id` seen,
//! one mark (`true`: a worker accepted a report with it; `false`: one went
//! to the caller undecided).
//!
//! Built for the 10^6 ids of `geopriv map aggregate` (BENCHMARKS.md,
//! "Branch speed07"): the id's 64-bit hash h is computed once by the
//! caller with the shards' per-process key (it also picks the shard), and
//! the table keeps, per id, one 8-byte slot in an open-addressing array
//! (linear probing, load at most 3/4) holding the low 32 bits of h, the
//! mark and the id's index, plus the 16-byte id itself in an append-only
//! store of fixed chunks. A lookup of a new id reads only slots (about
//! 11-21 bytes per id, 1.4 MB per shard at 2^20 ids over 8 shards, where
//! a `HashMap<[u8; 16], bool>` spread 18-byte buckets over 4.7 MB per
//! shard, and hashed the id a second time); the id store is read only on
//! a 32-bit hash match, to compare all 16 bytes (so two ids never merge).
//!
//! Memory: at most 16 bytes per id in the store (plus one partly filled
//! chunk of [`CHUNK`] ids) and 8 / load bytes per id in the slots, the
//! load kept between 3/8 and 3/4 (10.7-21.3 bytes per id), briefly the
//! old and the new slots while the table doubles: at most about 37 bytes
//! per id, 53 during a doubling.
//!
//! Hash flooding: the slots' position comes from h, a SipHash-1-3 of the
//! id under a key drawn per process ([`std::hash::RandomState`]), so
//! clients, who choose their ids, cannot choose ids that collide.

/// Ids per chunk of the id store (64 KiB).
pub(crate) const CHUNK: usize = 4096;

/// The most ids one table holds: an id's index + 1 is stored in 31 bits
/// (2^31 − 1 ids are 32 GiB of ids alone).
pub(crate) const MAX_IDS: usize = (1 << 31) - 2;

/// Where an id is, or would go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// In the table: its slot.
    Found(usize),
    /// Not in the table: the free slot it would take.
    Vacant(usize),
}

/// A shard's ids and their marks (module docs).
#[derive(Debug, Default)]
pub(crate) struct IdTable {
    /// 0: free; else `(h mod 2^32) << 32 | mark << 31 | (index + 1)`.
    slots: Vec<u64>,
    /// The ids, by index, in chunks of [`CHUNK`].
    ids: Vec<Vec<[u8; 16]>>,
    len: usize,
}

const MARK: u64 = 1 << 31;
const INDEX: u64 = MARK - 1;

impl IdTable {
    /// Ids held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Ids it holds without growing.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len() / 4 * 3
    }

    /// The home slot of hash `h` in `n` slots: ⌊(h mod 2^32) · n / 2^32⌋.
    fn home(h: u64, n: usize) -> usize {
        (((h & 0xFFFF_FFFF) as u128 * n as u128) >> 32) as usize
    }

    /// Make room for `more` ids beyond those held (the slots grow, at
    /// least doubling, to hold them at load at most 3/4). False if the
    /// table would hold more than [`MAX_IDS`].
    pub(crate) fn reserve(&mut self, more: usize) -> bool {
        let want = match self.len.checked_add(more) {
            Some(w) if w <= MAX_IDS => w,
            _ => return false,
        };
        if want <= self.capacity() {
            return true;
        }
        // Slots for `want` ids at load <= 3/4, at least twice the old
        // ones (one rehash per doubling), at least 16.
        let n = (want.div_ceil(3) * 4).max(self.slots.len() * 2).max(16);
        let old = core::mem::replace(&mut self.slots, std::vec![0u64; n]);
        for s in old.into_iter().filter(|&s| s != 0) {
            let mut p = Self::home(s >> 32, n);
            while self.slots[p] != 0 {
                p = if p + 1 == n { 0 } else { p + 1 };
            }
            self.slots[p] = s;
        }
        true
    }

    /// The home slot's content for hash `h` (0 if there are no slots):
    /// read for its side effect, the slot's cache line loaded. A batch's
    /// ids read this way first, independently of one another, have their
    /// lines fetched in parallel; the probes that follow, each a branch on
    /// the last load, then find them in the cache (BENCHMARKS.md, "Branch
    /// speed07").
    pub(crate) fn touch(&self, h: u64) -> u64 {
        let n = self.slots.len();
        self.slots.get(Self::home(h, n)).copied().unwrap_or(0)
    }

    /// The id at `index` in the store.
    fn id(&self, index: usize) -> Option<&[u8; 16]> {
        self.ids.get(index / CHUNK)?.get(index % CHUNK)
    }

    /// Look `id` (whose hash is `h`) up. The table must have a free slot
    /// (it always has after [`reserve`](Self::reserve)`(1)`).
    pub(crate) fn probe(&self, h: u64, id: &[u8; 16]) -> Probe {
        let n = self.slots.len();
        if n == 0 {
            return Probe::Vacant(0);
        }
        let tag = h << 32;
        let mut p = Self::home(h, n);
        // At most n steps: a table without a free slot ends the search.
        for _ in 0..n {
            let s = self.slots[p];
            if s == 0 {
                return Probe::Vacant(p);
            }
            if s & !(MARK | INDEX) == tag
                && self.id(((s & INDEX) - 1) as usize).is_some_and(|x| x == id)
            {
                return Probe::Found(p);
            }
            p = if p + 1 == n { 0 } else { p + 1 };
        }
        Probe::Vacant(n)
    }

    /// The mark in slot `p` (from [`probe`](Self::probe)'s `Found`).
    pub(crate) fn mark(&self, p: usize) -> bool {
        self.slots.get(p).is_some_and(|&s| s & MARK != 0)
    }

    /// Set the mark in slot `p` (from `Found`).
    pub(crate) fn set_mark(&mut self, p: usize, mark: bool) {
        if let Some(s) = self.slots.get_mut(p) {
            *s = (*s & !MARK) | if mark { MARK } else { 0 };
        }
    }

    /// Put `id` (hash `h`) with `mark` in the free slot `p` from
    /// [`probe`](Self::probe)'s `Vacant` (no other change in between).
    /// False if there is no such slot or no room ([`MAX_IDS`]).
    pub(crate) fn insert(&mut self, p: usize, h: u64, id: [u8; 16], mark: bool) -> bool {
        if self.len >= MAX_IDS || self.slots.get(p) != Some(&0) {
            return false;
        }
        let index = self.len;
        if self.ids.last().is_none_or(|c| c.len() == CHUNK) {
            self.ids.push(Vec::with_capacity(CHUNK));
        }
        if let Some(c) = self.ids.last_mut() {
            c.push(id);
        }
        self.len += 1;
        self.slots[p] = (h << 32) | if mark { MARK } else { 0 } | (index as u64 + 1);
        true
    }

    /// The ids marked `true`, moved out (the table left empty).
    pub(crate) fn take_marked(&mut self) -> Vec<[u8; 16]> {
        let slots = core::mem::take(&mut self.slots);
        let out = slots
            .iter()
            .filter(|&&s| s & MARK != 0)
            .filter_map(|&s| self.id(((s & INDEX) - 1) as usize).copied())
            .collect();
        *self = IdTable::default();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The table's rule against a HashMap's: `ops` are (id byte, hash,
    /// new mark or None to only look); returns both tables' answers.
    fn both(ops: &[(u8, u64, Option<bool>)], reserve: usize) {
        let mut t = IdTable::default();
        assert!(t.reserve(reserve));
        let mut r: HashMap<[u8; 16], bool> = HashMap::new();
        for (k, &(b, h, set)) in ops.iter().enumerate() {
            let id = [b; 16];
            assert!(t.reserve(1));
            let got = match t.probe(h, &id) {
                Probe::Found(p) => {
                    let m = t.mark(p);
                    if let Some(m) = set {
                        t.set_mark(p, m);
                    }
                    Some(m)
                }
                Probe::Vacant(p) => {
                    if let Some(m) = set {
                        assert!(t.insert(p, h, id, m));
                    }
                    None
                }
            };
            let want = r.get(&id).copied();
            if let Some(m) = set {
                r.insert(id, m);
            }
            assert_eq!(got, want, "op {k}");
            assert_eq!(t.len(), r.len());
        }
        let mut a = t.take_marked();
        let mut b: Vec<[u8; 16]> = r.iter().filter(|e| *e.1).map(|e| *e.0).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn agrees_with_a_hash_map_on_distinct_hashes() {
        let ops: Vec<(u8, u64, Option<bool>)> = (0..3000u32)
            .map(|k| {
                let b = (k * 7 % 251) as u8;
                let h = (b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let set = match k % 3 {
                    0 => None,
                    1 => Some(true),
                    _ => Some(k % 2 == 0),
                };
                (b, h, set)
            })
            .collect();
        both(&ops, 0);
        both(&ops, 1000);
    }

    #[test]
    fn hostile_ids_with_one_hash_stay_apart() {
        // Every id has the same hash (what a flooding client would want):
        // one long probe run, each id still its own entry, found by its
        // 16 bytes, including after the table doubles.
        let ops: Vec<(u8, u64, Option<bool>)> = (0..600u32)
            .map(|k| {
                let b = (k * 13 % 97) as u8;
                let set = (k % 4 != 3).then_some(k % 5 < 3);
                (b, 0xDEAD_BEEF_0000_0000 | 42, set)
            })
            .collect();
        both(&ops, 0);
        // Same low 32 bits, different high bits: the slots keep only the
        // low ones, so these meet too.
        let ops: Vec<(u8, u64, Option<bool>)> = (0..600u32)
            .map(|k| {
                let b = (k * 31 % 200) as u8;
                (b, ((b as u64) << 40) | 7, Some(k % 3 == 0))
            })
            .collect();
        both(&ops, 5);
    }

    #[test]
    fn the_index_and_store_cross_chunks() {
        let mut t = IdTable::default();
        for k in 0..(2 * CHUNK + 5) as u64 {
            let mut id = [0u8; 16];
            id[..8].copy_from_slice(&k.to_le_bytes());
            let h = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (k >> 7);
            assert!(t.reserve(1));
            let Probe::Vacant(p) = t.probe(h, &id) else {
                panic!("id {k} found before it was added");
            };
            assert!(t.insert(p, h, id, k % 2 == 0));
        }
        for k in 0..(2 * CHUNK + 5) as u64 {
            let mut id = [0u8; 16];
            id[..8].copy_from_slice(&k.to_le_bytes());
            let h = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (k >> 7);
            let Probe::Found(p) = t.probe(h, &id) else {
                panic!("id {k} lost");
            };
            assert_eq!(t.mark(p), k % 2 == 0);
        }
        assert!(t.capacity() >= t.len() && t.len() * 8 >= t.capacity() * 3);
        assert_eq!(t.take_marked().len(), CHUNK + 3);
    }

    #[test]
    fn refuses_more_than_the_index_holds() {
        let mut t = IdTable::default();
        assert!(!t.reserve(MAX_IDS + 1));
        assert!(!t.reserve(usize::MAX));
        assert_eq!(t.probe(1, &[0; 16]), Probe::Vacant(0));
        // Nothing to insert into before a reserve.
        assert!(!t.insert(0, 1, [0; 16], true));
    }
}
