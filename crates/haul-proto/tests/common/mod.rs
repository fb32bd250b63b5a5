//! Helpers shared by the property tests: cutting a byte stream into arbitrary chunks.

use proptest::prelude::*;
use proptest::sample::Index;

/// Up to `max` cut points, to be resolved against a stream's length by [`chunks`].
pub fn cuts(max: usize) -> impl Strategy<Value = Vec<Index>> {
    prop::collection::vec(any::<Index>(), 0..max)
}

/// Splits `data` at the given cut points (resolved modulo its length, sorted, deduplicated).
pub fn chunks<'a>(data: &'a [u8], cuts: &[Index]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c.index(data.len() + 1)).collect();
    at.push(0);
    at.push(data.len());
    at.sort_unstable();
    at.dedup();
    at.windows(2).map(|w| &data[w[0]..w[1]]).collect()
}
