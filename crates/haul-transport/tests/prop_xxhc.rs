//! Property tests of XXHC (`checksum::chunked`): the digest of bytes handed over in any order,
//! in any pieces, is the digest of the file; a flipped byte is found in its chunk and nowhere
//! else; and the `CKSM XXHC-LIST` reply a client reads from a server round-trips and refuses
//! what does not fit.

use haul_transport::checksum::chunked::{
    chunks, ChunkList, Chunked, ListWindow, Sequential, CHUNK, MAX_LIST,
};
use proptest::prelude::*;

fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn sequential(d: &[u8]) -> ChunkList {
    let mut s = Sequential::default();
    s.update(d);
    s.finish()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn any_order_any_pieces_give_the_file_digest(
        len in 0usize..(3 * CHUNK as usize + 5000),
        cuts in prop::collection::vec(1usize..700_000, 1..12),
        order in any::<prop::sample::Index>(),
        seed in any::<u8>(),
    ) {
        let d = bytes(len, seed);
        let mut pieces = Vec::new();
        let (mut at, mut k) = (0usize, 0usize);
        while at < len {
            let n = cuts[k % cuts.len()].min(len - at);
            pieces.push((at, n));
            at += n;
            k += 1;
        }
        // Rotate, then reverse every other piece pair: blocks far out of order.
        let r = if pieces.is_empty() { 0 } else { order.index(pieces.len()) };
        pieces.rotate_left(r);
        for pair in pieces.chunks_mut(2).step_by(2) {
            pair.reverse();
        }
        let c = Chunked::new();
        for (o, n) in pieces {
            c.update(o as u64, &d[o..o + n], &d);
        }
        prop_assert_eq!(c.finish(len as u64), Some(sequential(&d)));
    }

    #[test]
    fn a_flipped_byte_is_found_in_its_chunk(len in 1usize..(4 * CHUNK as usize), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let d = bytes(len, 3);
        let at = at.index(len);
        let mut bad = d.clone();
        bad[at] ^= 1 << bit;
        let (good, worse) = (sequential(&d), sequential(&bad));
        prop_assert_ne!(good.root(), worse.root());
        let c = at as u64 / CHUNK;
        prop_assert_eq!(
            worse.differing(0, &good.digests),
            vec![(c * CHUNK, ((c + 1) * CHUNK).min(len as u64))]
        );
    }

    #[test]
    fn list_windows_round_trip(len in 0u64..(1 << 44), offset in any::<u64>(), seed in any::<u64>()) {
        let n = chunks(len).min(MAX_LIST + 3);
        let list = ChunkList {
            len,
            digests: (0..n).map(|i| u128::from(seed ^ i) << 64 | u128::from(i)).collect(),
        };
        let w = ListWindow::of(&list, offset % (len + 1), None);
        prop_assert!(w.digests.len() as u64 <= MAX_LIST);
        prop_assert_eq!(ListWindow::parse(&w.to_lines()), Ok(w));
    }

    #[test]
    fn lists_that_do_not_fit_are_refused(first in 0u64..10, count in 0u64..10, len in 0u64..(10 * CHUNK)) {
        let mut lines = vec![format!("XXHC-LIST {first} {count} {len}")];
        lines.extend((0..count).map(|i| format!("{i:032x}")));
        lines.push("End.".into());
        let fits = first + count <= chunks(len);
        prop_assert_eq!(ListWindow::parse(&lines).is_ok(), fits);
    }
}
