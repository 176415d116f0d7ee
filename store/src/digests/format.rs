//! A digest's bytes: the clicks of one period (a day or a block of days) counted by dimension and value.
//!
//! Written by hand rather than through a serde format: the statistics decode up to a few hundred digests of a few
//! thousand values each per request, and reading them as borrowed `&str` slices of the fetched rows, with no
//! allocation per value, is what keeps a year's statistics in milliseconds. The format is small enough to test
//! whole (below):
//!
//! ```text
//! digest  := VERSION (dimension count entry*)*        dimensions ascending, each at most once
//! entry   := length key count                         keys ascending (bytes), UTF-8, count > 0
//! length, count, dimension's count := LEB128 unsigned varint
//! ```

use std::collections::{BTreeMap, HashMap};

use crate::error::StoreError;

/// The first byte of every digest.
const VERSION: u8 = 1;

/// A dimension of the statistics. Stored as its number, so numbers are never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Dimension(pub(crate) u8);

impl Dimension {
    /// ISO 3166-1 alpha-2, uppercase; `""` when unknown.
    pub(crate) const COUNTRY: Self = Self(0);
    /// `mobile`, `desktop`, `tablet`, `other`.
    pub(crate) const DEVICE: Self = Self(1);
    /// The referrer's host, lowercase; `""` when none.
    pub(crate) const REFERRER: Self = Self(2);
    /// `chrome`, `safari`, …, `other` ([`crate::user_agent`]).
    pub(crate) const BROWSER: Self = Self(3);
    /// `ios`, `android`, …, `other` ([`crate::user_agent`]).
    pub(crate) const OS: Self = Self(4);
    /// The country, a TAB, the region's name (each `""` when unknown).
    pub(crate) const REGION: Self = Self(5);
    /// The country, a TAB, the city's name (each `""` when unknown).
    pub(crate) const CITY: Self = Self(6);
    /// The visited URL's `utm_source`; `""` when it had none.
    pub(crate) const UTM_SOURCE: Self = Self(7);
    /// `utm_medium`, likewise.
    pub(crate) const UTM_MEDIUM: Self = Self(8);
    /// `utm_campaign`, likewise.
    pub(crate) const UTM_CAMPAIGN: Self = Self(9);
}

/// Most distinct values of one dimension in one stored digest. Visitors choose their UTM parameters and Referer, so
/// without a bound one link's (and its group's and account's) day row could be made to grow without end, and every
/// fold would rewrite it whole. Past the bound a digest keeps the values with the most clicks ([`Digest::cap`])
/// and counts the others together under [`OTHER_VALUES`], which no list shows: the statistics list at most 100
/// values of a dimension, so a flood of made-up values cannot push a real campaign with a few clicks out of them.
/// A row then holds at most about 10 × 500 values.
pub(crate) const MAX_VALUES: usize = 500;

/// Where a digest counts the values past [`MAX_VALUES`]: never a real value (stored values hold no control
/// character but a place's TAB), and never listed.
pub(crate) const OTHER_VALUES: &str = "\u{1}";

/// An owned digest: what a report adds to a period, or a period's stored digest while it is changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Digest {
    counts: BTreeMap<(Dimension, String), i64>,
}

impl Digest {
    /// Adds `n` clicks with `value` of `dimension`.
    pub(crate) fn add(&mut self, dimension: Dimension, value: &str, n: i64) {
        if let Some(c) = self.counts.get_mut(&(dimension, value.to_owned())) {
            *c += n;
        } else {
            self.counts.insert((dimension, value.to_owned()), n);
        }
    }

    /// Adds (`sign` 1) or takes out (`sign` -1) every count of `other`; values left at 0 or below are dropped (a
    /// deleted link's clicks leave nothing behind). Adding keeps each dimension to [`MAX_VALUES`] values
    /// ([`Digest::cap`]). Taking out a value this digest had already folded into [`OTHER_VALUES`] leaves that
    /// bucket as it was and can leave the value's listed count of a shared row (a group's, an account's) a little
    /// high; the rows' clicks are counted apart, so totals stay exact.
    pub(crate) fn merge(&mut self, other: &Digest, sign: i64) {
        for ((d, v), n) in &other.counts {
            *self.counts.entry((*d, v.clone())).or_default() += sign * n;
        }
        self.counts.retain(|_, n| *n > 0);
        if sign > 0 {
            self.cap();
        }
    }

    /// Keeps at most [`MAX_VALUES`] values of each dimension: those with the most clicks (ties: the smaller value),
    /// the others' clicks added to [`OTHER_VALUES`].
    pub(crate) fn cap(&mut self) {
        let mut sizes: BTreeMap<Dimension, usize> = BTreeMap::new();
        for (d, v) in self.counts.keys() {
            if v != OTHER_VALUES {
                *sizes.entry(*d).or_default() += 1;
            }
        }
        for (dimension, size) in sizes {
            if size <= MAX_VALUES {
                continue;
            }
            let mut values: Vec<(String, i64)> = self
                .counts
                .iter()
                .filter(|((d, v), _)| *d == dimension && v != OTHER_VALUES)
                .map(|((_, v), n)| (v.clone(), *n))
                .collect();
            values.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            let mut folded = 0;
            for (v, n) in values.drain(MAX_VALUES..) {
                self.counts.remove(&(dimension, v));
                folded += n;
            }
            *self
                .counts
                .entry((dimension, OTHER_VALUES.to_owned()))
                .or_default() += folded;
        }
    }

    /// The digest's bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 + self.counts.len() * 8);
        out.push(VERSION);
        let mut rest = self.counts.iter().filter(|(_, n)| **n > 0).peekable();
        while let Some(((dimension, _), _)) = rest.peek() {
            let dimension = *dimension;
            let section: Vec<(&str, i64)> = std::iter::from_fn(|| {
                rest.next_if(|((d, _), _)| *d == dimension)
                    .map(|((_, v), n)| (v.as_str(), *n))
            })
            .collect();
            out.push(dimension.0);
            put_varint(&mut out, section.len() as u64);
            for (value, n) in section {
                put_varint(&mut out, value.len() as u64);
                out.extend_from_slice(value.as_bytes());
                put_varint(&mut out, n as u64);
            }
        }
        out
    }

    /// Whether it counts nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Reads a stored digest.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, StoreError> {
        let mut digest = Self::default();
        for_each(bytes, |d, v, n| {
            digest.counts.insert((d, v.to_owned()), n);
        })?;
        Ok(digest)
    }
}

/// Counts added up from many digests, keyed by slices of their bytes (see the module's documentation).
#[derive(Debug, Default)]
pub(crate) struct Tally<'a> {
    counts: HashMap<(Dimension, &'a str), i64>,
}

impl<'a> Tally<'a> {
    /// Adds `n` clicks with `value` of `dimension`, borrowing the value (a report's clicks, counted before they are
    /// stored: no allocation per click and dimension, as an owned [`Digest`] would make).
    pub(crate) fn add(&mut self, dimension: Dimension, value: &'a str, n: i64) {
        *self.counts.entry((dimension, value)).or_default() += n;
    }

    /// Adds a stored digest.
    pub(crate) fn add_encoded(&mut self, bytes: &'a [u8]) -> Result<(), StoreError> {
        for_each(bytes, |d, v, n| {
            *self.counts.entry((d, v)).or_default() += n
        })
    }

    /// The tally as an owned digest, to be stored.
    pub(crate) fn to_digest(&self) -> Digest {
        Digest {
            counts: self
                .counts
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|((d, v), n)| ((*d, (*v).to_owned()), *n))
                .collect(),
        }
    }

    /// The values of `dimension` with their clicks, most first, then by value (bytes); at most `limit`.
    pub(crate) fn top(&self, dimension: Dimension, limit: usize) -> Vec<(&'a str, i64)> {
        let mut values: Vec<(&'a str, i64)> = self
            .counts
            .iter()
            .filter(|((d, v), n)| *d == dimension && **n > 0 && *v != OTHER_VALUES)
            .map(|((_, v), n)| (*v, *n))
            .collect();
        values.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        values.truncate(limit);
        values
    }
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Reads the bytes of one digest, calling `each` with every (dimension, value, clicks).
fn for_each<'a>(
    bytes: &'a [u8],
    mut each: impl FnMut(Dimension, &'a str, i64),
) -> Result<(), StoreError> {
    let corrupt =
        |what: &str| StoreError::Internal(format!("a click digest that does not parse: {what}"));
    let mut at = match bytes.split_first() {
        Some((&VERSION, rest)) => rest,
        Some((v, _)) => return Err(corrupt(&format!("version {v}"))),
        None => return Err(corrupt("empty")),
    };
    let varint = |at: &mut &'a [u8]| -> Result<u64, StoreError> {
        let mut n: u64 = 0;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = at.split_first().ok_or_else(|| corrupt("cut short"))?;
            *at = rest;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(corrupt("a varint over 64 bits"))
    };
    while let Some((&dimension, rest)) = at.split_first() {
        at = rest;
        let entries = varint(&mut at)?;
        for _ in 0..entries {
            let len = usize::try_from(varint(&mut at)?).map_err(|_| corrupt("length"))?;
            if len > at.len() {
                return Err(corrupt("a value past the end"));
            }
            let (value, rest) = at.split_at(len);
            at = rest;
            let value = std::str::from_utf8(value).map_err(|_| corrupt("a value not UTF-8"))?;
            let n = i64::try_from(varint(&mut at)?).map_err(|_| corrupt("a count over i64"))?;
            each(Dimension(dimension), value, n);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Digest {
        let mut d = Digest::default();
        d.add(Dimension::COUNTRY, "DE", 3);
        d.add(Dimension::COUNTRY, "", 1);
        d.add(Dimension::DEVICE, "mobile", 4);
        d.add(Dimension::REFERRER, "é.example", 300);
        d.add(Dimension::COUNTRY, "DE", 2);
        d
    }

    #[test]
    fn round_trips_and_is_compact() {
        let d = sample();
        let bytes = d.encode();
        assert_eq!(Digest::decode(&bytes).unwrap(), d);
        // version; country: 2 entries ("" 1, "DE" 5); device: 1; referrer: 1 (300 takes two bytes)
        assert_eq!(
            bytes,
            [
                &[1, 0, 2, 0, 1, 2, b'D', b'E', 5, 1, 1, 6][..],
                b"mobile",
                &[4, 2, 1, 10],
                "é.example".as_bytes(),
                &[0xac, 0x02],
            ]
            .concat()
        );
        assert_eq!(Digest::default().encode(), [VERSION]);
        assert_eq!(Digest::decode(&[VERSION]).unwrap(), Digest::default());
    }

    #[test]
    fn merging_adds_and_takes_out() {
        let mut d = sample();
        d.merge(&sample(), 1);
        assert_eq!(
            Digest::decode(&d.encode()).unwrap().counts[&(Dimension::DEVICE, "mobile".into())],
            8
        );
        d.merge(&sample(), -1);
        assert_eq!(d, sample());
        d.merge(&sample(), -1);
        assert_eq!(d, Digest::default());
        assert_eq!(d.encode(), [VERSION]);
    }

    #[test]
    fn tallies_add_up_borrowed_and_rank() {
        let a = sample().encode();
        let mut other = Digest::default();
        other.add(Dimension::COUNTRY, "US", 5);
        other.add(Dimension::COUNTRY, "DE", 1);
        let b = other.encode();
        let mut t = Tally::default();
        t.add_encoded(&a).unwrap();
        t.add_encoded(&b).unwrap();
        // DE 6, US 5, "" 1; ties by value.
        assert_eq!(
            t.top(Dimension::COUNTRY, 10),
            [("DE", 6), ("US", 5), ("", 1)]
        );
        assert_eq!(t.top(Dimension::COUNTRY, 2), [("DE", 6), ("US", 5)]);
        let mut both = sample();
        both.merge(&other, 1);
        assert_eq!(t.to_digest(), both);
    }

    #[test]
    fn each_dimension_keeps_the_values_with_most_clicks() {
        let mut row = Digest::default();
        // A real campaign with a few clicks early, then a flood of made-up values, one click each.
        let mut real = Digest::default();
        real.add(Dimension::UTM_SOURCE, "newsletter", 3);
        real.add(Dimension::DEVICE, "mobile", 3);
        row.merge(&real, 1);
        for round in 0..3 {
            let mut flood = Digest::default();
            for i in 0..1_000 {
                flood.add(
                    Dimension::UTM_SOURCE,
                    &format!("v{:04}", round * 1_000 + i),
                    1,
                );
            }
            flood.add(Dimension::DEVICE, "mobile", 1_000);
            row.merge(&flood, 1);
        }
        let sources = row
            .counts
            .keys()
            .filter(|(d, _)| *d == Dimension::UTM_SOURCE);
        // MAX_VALUES values and the bucket of the rest; other dimensions unaffected; the campaign kept, exact.
        assert_eq!(sources.count(), MAX_VALUES + 1);
        assert_eq!(row.counts[&(Dimension::UTM_SOURCE, "newsletter".into())], 3);
        assert_eq!(
            row.counts[&(Dimension::UTM_SOURCE, OTHER_VALUES.into())],
            3_000 - (MAX_VALUES as i64 - 1)
        );
        assert_eq!(row.counts[&(Dimension::DEVICE, "mobile".into())], 3_003);
        // A later real value with more clicks than the flood's comes in and stays.
        let mut late = Digest::default();
        late.add(Dimension::UTM_SOURCE, "spring", 2);
        row.merge(&late, 1);
        assert_eq!(row.counts[&(Dimension::UTM_SOURCE, "spring".into())], 2);
        // The bucket is never listed.
        let bytes = row.encode();
        let mut t = Tally::default();
        t.add_encoded(&bytes).unwrap();
        let top = t.top(Dimension::UTM_SOURCE, usize::MAX);
        assert_eq!(top.len(), MAX_VALUES);
        assert_eq!(top[0], ("newsletter", 3));
        assert!(top.iter().all(|(v, _)| *v != OTHER_VALUES));
    }

    #[test]
    fn corrupt_bytes_are_errors_not_panics() {
        let good = sample().encode();
        for cut in 0..good.len() {
            // Every prefix either parses (a cut between sections) or is an error.
            let _ = Digest::decode(&good[..cut]);
        }
        assert!(Digest::decode(&[]).is_err());
        assert!(Digest::decode(&[2]).is_err());
        assert!(
            Digest::decode(&[VERSION, 0, 1, 9, b'a']).is_err(),
            "value past the end"
        );
        assert!(
            Digest::decode(&[VERSION, 0, 1, 1, 0xff, 1]).is_err(),
            "not UTF-8"
        );
        assert!(
            Digest::decode(&[
                VERSION, 0, 1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01
            ])
            .is_err()
        );
    }
}
