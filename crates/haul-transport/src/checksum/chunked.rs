//! XXHC: an order-independent digest of a whole file, so both ends of a MODE E transfer can
//! hash the bytes while they pass, whichever stream carries each block and in whatever order
//! the blocks land, and never read the file a second time.
//!
//! The file is cut into chunks of [`CHUNK`] bytes from offset 0 (the last one may be shorter).
//! Each chunk is hashed on its own with XXH3-128; the digest of the file is XXH3-128 over the
//! chunk digests, each as 16 little-endian bytes, in file order, followed by the file's length
//! as 8 little-endian bytes. A chunk is hashed in order as its bytes arrive, so a sender that
//! keeps each chunk on one stream (haul's MODE E sender cuts blocks on chunk boundaries) lets the
//! receiver hash every byte once, while it is still in cache. Bytes of a chunk that arrive
//! ahead of the rest of that chunk are read back from the copy once the gap is filled.
//!
//! The list of chunk digests also says which chunks differ when two ends disagree, so a
//! mismatch re-sends those chunks, not the file.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use twox_hash::XxHash3_128 as Xxh3;

use super::{feed, Algorithm, Hasher, Running};
use crate::io::Source;

/// Bytes per chunk: 1 MiB, haul's default MODE E block.
pub const CHUNK: u64 = 1 << 20;

/// Chunks a file of `len` bytes has.
pub fn chunks(len: u64) -> u64 {
    len.div_ceil(CHUNK)
}

/// The digests of a whole file's chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkList {
    /// The file's length.
    pub len: u64,
    /// XXH3-128 of each chunk, in file order.
    pub digests: Vec<u128>,
}

impl ChunkList {
    /// The file's digest: XXH3-128 over the chunk digests and the length.
    pub fn root(&self) -> u128 {
        let mut h = Xxh3::new();
        for d in &self.digests {
            h.write(&d.to_le_bytes());
        }
        h.write(&self.len.to_le_bytes());
        h.finish_128()
    }

    /// [`ChunkList::root`] as 32 lowercase hex digits, the CKSM reply.
    pub fn root_hex(&self) -> String {
        format!("{:032x}", self.root())
    }

    /// The byte ranges of the chunks `first..first + theirs.len()` whose digests differ from
    /// `theirs` (theirs\[0\] is chunk `first`), merged where adjacent. A chunk this list lacks
    /// counts as differing.
    pub fn differing(&self, first: u64, theirs: &[u128]) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (k, t) in theirs.iter().enumerate() {
            let i = first as usize + k;
            if self.digests.get(i) == Some(t) {
                continue;
            }
            let (s, e) = (i as u64 * CHUNK, ((i as u64 + 1) * CHUNK).min(self.len));
            match out.last_mut() {
                Some(last) if last.1 == s => last.1 = e,
                _ => out.push((s, e)),
            }
        }
        out
    }
}

fn digest_of(h: Hasher) -> u128 {
    match h {
        Hasher::Xxh(h) => h.finish_128(),
        _ => unreachable!("chunks are hashed with XXH3-128"),
    }
}

/// The XXH3-128 digests of the chunks of `src` in `[start, end)`; `start` is a multiple of
/// [`CHUNK`]. Fails if the source ends before `end`.
pub fn feed_chunks(src: &dyn Source, start: u64, end: u64) -> std::io::Result<Vec<u128>> {
    let mut out = Vec::new();
    let mut at = start;
    while at < end {
        let stop = (at + CHUNK).min(end);
        let mut h = Hasher::new(Algorithm::Xxh128);
        if feed(&mut h, src, at, Some(stop))? < stop {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("file ended before byte {stop}"),
            ));
        }
        out.push(digest_of(h));
        at = stop;
    }
    Ok(out)
}

/// XXHC over bytes fed in file order (a CKSM that reads the file).
#[derive(Default)]
pub struct Sequential {
    cur: Xxh3,
    in_cur: u64,
    len: u64,
    digests: Vec<u128>,
}

impl Sequential {
    /// Feeds the next bytes of the file.
    pub fn update(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let n = ((CHUNK - self.in_cur) as usize).min(data.len());
            self.cur.write(&data[..n]);
            self.in_cur += n as u64;
            self.len += n as u64;
            data = &data[n..];
            if self.in_cur == CHUNK {
                self.digests.push(self.cur.finish_128());
                self.cur = Xxh3::new();
                self.in_cur = 0;
            }
        }
    }

    /// The chunk list of everything fed.
    pub fn finish(mut self) -> ChunkList {
        if self.in_cur > 0 {
            self.digests.push(self.cur.finish_128());
        }
        ChunkList {
            len: self.len,
            digests: self.digests,
        }
    }
}

/// XXHC over bytes handed over at any offsets, from any number of threads at once: each chunk
/// has its own in-order hasher, so streams carrying different chunks hash in parallel.
#[derive(Default)]
pub struct Chunked {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Chunks being hashed; a slot is emptied when its chunk closes, so bytes that reach a
    /// closed chunk through a slot taken just before are seen as bytes given twice.
    open: HashMap<u64, Arc<Mutex<Option<Running>>>>,
    /// Digests of chunks `0..prefix.len()`, all finished: 16 bytes per MiB of file.
    prefix: Vec<u128>,
    /// Finished chunks beyond the prefix, until the chunks before them finish (a few per
    /// stream when blocks arrive out of order).
    ahead: BTreeMap<u64, u128>,
    broken: bool,
}

impl State {
    fn finished(&self, idx: u64) -> bool {
        idx < self.prefix.len() as u64 || self.ahead.contains_key(&idx)
    }

    /// Records chunk `idx`'s digest; a chunk finished twice loses the digest.
    fn finish(&mut self, idx: u64, d: u128) {
        if self.finished(idx) {
            self.broken = true;
            return;
        }
        self.ahead.insert(idx, d);
        while let Some(d) = self.ahead.remove(&(self.prefix.len() as u64)) {
            self.prefix.push(d);
        }
    }
}

impl Chunked {
    /// An empty digest.
    pub fn new() -> Chunked {
        Chunked::default()
    }

    /// Notes `data` at `offset`, hashing what continues each chunk's hashed prefix at once and
    /// reading from `copy` what came ahead once the gap before it is filled. Bytes handed over
    /// twice, or a failed read-back, leave no digest ([`Chunked::finish`] gives None).
    pub fn update(&self, offset: u64, data: &[u8], copy: &dyn Source) {
        let mut at = offset;
        let mut rest = data;
        while !rest.is_empty() {
            let idx = at / CHUNK;
            let end = (idx + 1) * CHUNK;
            let n = ((end - at) as usize).min(rest.len());
            self.piece(idx, at, &rest[..n], copy);
            at += n as u64;
            rest = &rest[n..];
        }
    }

    fn piece(&self, idx: u64, at: u64, data: &[u8], copy: &dyn Source) {
        let Some(run) = self.chunk(idx) else { return };
        let Ok(mut slot) = run.lock() else {
            return self.break_it();
        };
        let Some(r) = slot.as_mut() else {
            // Closed by another stream meanwhile: these bytes came twice.
            return self.break_it();
        };
        r.update(at, data);
        if r.behind() && r.catch_up(copy).is_err() {
            return self.break_it();
        }
        if r.hashed_to() == (idx + 1) * CHUNK {
            if let Some(r) = slot.take() {
                self.close(idx, r);
            }
        }
    }

    /// The hasher of chunk `idx`, opened on first use; None once the digest is lost.
    fn chunk(&self, idx: u64) -> Option<Arc<Mutex<Option<Running>>>> {
        let mut st = self.state.lock().ok()?;
        if st.broken {
            return None;
        }
        if st.finished(idx) {
            // The chunk was hashed already: these bytes came twice.
            st.broken = true;
            return None;
        }
        let run = st.open.entry(idx).or_insert_with(|| {
            Arc::new(Mutex::new(Some(Running::at(
                Algorithm::Xxh128,
                idx * CHUNK,
            ))))
        });
        Some(run.clone())
    }

    /// Moves chunk `idx`, whose hasher `run` was, from the open chunks to the finished ones.
    fn close(&self, idx: u64, run: Running) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        st.open.remove(&idx);
        match run.into_hasher((idx + 1) * CHUNK) {
            Some(h) => st.finish(idx, digest_of(h)),
            None => st.broken = true,
        }
    }

    fn break_it(&self) {
        if let Ok(mut st) = self.state.lock() {
            st.broken = true;
        }
    }

    /// The chunk list of bytes `[0, len)`, or None unless exactly those were hashed, each once.
    pub fn finish(self, len: u64) -> Option<ChunkList> {
        let mut st = self.state.into_inner().ok()?;
        if st.broken {
            return None;
        }
        let n = chunks(len);
        if let Some(last) = n.checked_sub(1).filter(|_| !len.is_multiple_of(CHUNK)) {
            let run = st.open.remove(&last)?;
            let run = Arc::try_unwrap(run).ok()?.into_inner().ok()??;
            st.finish(last, digest_of(run.into_hasher(len)?));
        }
        if st.broken || !st.open.is_empty() || !st.ahead.is_empty() || st.prefix.len() as u64 != n {
            return None;
        }
        Some(ChunkList {
            len,
            digests: st.prefix,
        })
    }
}

/// The `CKSM` algorithm name that asks for chunk digests rather than the file's
/// (`CKSM XXHC-LIST <offset> <length> <path>`).
pub const LIST: &str = "XXHC-LIST";

/// Most chunk digests one `XXHC-LIST` reply carries (4 GiB of file in 4,098 lines, within any
/// reply parser's line bound); a client asks again from where the reply stopped.
pub const MAX_LIST: u64 = 4096;

/// A chunk-list reply that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListError {
    /// The first line is not `XXHC-LIST <first> <count> <length>`.
    #[error("XXHC-LIST reply: bad header {0:?}")]
    Header(String),
    /// The chunks claimed do not fit the file, or more than [`MAX_LIST`] of them.
    #[error("XXHC-LIST reply: chunks {first}..+{count} do not fit a file of {len} bytes (at most {MAX_LIST} per reply)")]
    Range {
        /// First chunk.
        first: u64,
        /// Chunks claimed.
        count: u64,
        /// File length claimed.
        len: u64,
    },
    /// The reply holds a different number of digest lines than its header says.
    #[error("XXHC-LIST reply: {got} digest lines, header says {want}")]
    Count {
        /// Lines present.
        got: usize,
        /// Lines announced.
        want: u64,
    },
    /// A digest line is not 32 hex digits.
    #[error("XXHC-LIST reply: bad digest line {0:?}")]
    Digest(String),
}

/// A window of a file's chunk digests as a reply carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListWindow {
    /// Index of the first chunk.
    pub first: u64,
    /// The file's length.
    pub len: u64,
    /// Digests of chunks `first..first + digests.len()`.
    pub digests: Vec<u128>,
}

/// The chunks of a file with `n` chunks that `CKSM XXHC-LIST <offset> <length>` asks for: from
/// the one holding byte `offset`, at most [`MAX_LIST`] of them and none past `offset + length`.
fn window(n: u64, offset: u64, length: Option<u64>) -> std::ops::Range<u64> {
    let first = (offset / CHUNK).min(n);
    let end = length
        .map_or(n, |l| chunks(offset.saturating_add(l)).min(n))
        .min(first + MAX_LIST)
        .max(first);
    first..end
}

impl ListWindow {
    /// The window of `list` that starts at byte `offset` (rounded down to its chunk) and holds
    /// at most [`MAX_LIST`] chunks and none past `offset + length`.
    pub fn of(list: &ChunkList, offset: u64, length: Option<u64>) -> ListWindow {
        let w = window(list.digests.len() as u64, offset, length);
        ListWindow {
            first: w.start,
            len: list.len,
            digests: list.digests[w.start as usize..w.end as usize].to_vec(),
        }
    }

    /// The same window of a file of `len` bytes, hashed from `src`.
    pub fn read(
        src: &dyn Source,
        len: u64,
        offset: u64,
        length: Option<u64>,
    ) -> std::io::Result<ListWindow> {
        let w = window(chunks(len), offset, length);
        Ok(ListWindow {
            first: w.start,
            len,
            digests: feed_chunks(src, w.start * CHUNK, (w.end * CHUNK).min(len))?,
        })
    }

    /// The text lines of a `213` reply carrying the window: a header, one digest per line,
    /// and an end line.
    pub fn to_lines(&self) -> Vec<String> {
        let mut lines = Vec::with_capacity(self.digests.len() + 2);
        lines.push(format!(
            "{LIST} {} {} {}",
            self.first,
            self.digests.len(),
            self.len
        ));
        lines.extend(self.digests.iter().map(|d| format!("{d:032x}")));
        lines.push("End.".into());
        lines
    }

    /// Reads a window back from a reply's text lines (header, digests, end line).
    pub fn parse(lines: &[String]) -> Result<ListWindow, ListError> {
        let header = lines.first().map(String::as_str).unwrap_or("");
        let bad = || ListError::Header(header.chars().take(80).collect());
        let mut it = header.split_ascii_whitespace();
        if it.next() != Some(LIST) {
            return Err(bad());
        }
        let mut num =
            || -> Result<u64, ListError> { it.next().and_then(|t| t.parse().ok()).ok_or_else(bad) };
        let (first, count, len) = (num()?, num()?, num()?);
        if it.next().is_some() {
            return Err(bad());
        }
        if count > MAX_LIST || first.checked_add(count).is_none_or(|e| e > chunks(len)) {
            return Err(ListError::Range { first, count, len });
        }
        let body = lines.get(1..lines.len().saturating_sub(1)).unwrap_or(&[]);
        if body.len() as u64 != count || lines.len() < 2 {
            return Err(ListError::Count {
                got: body.len(),
                want: count,
            });
        }
        let digests = body
            .iter()
            .map(|l| {
                let t = l.trim();
                (t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()))
                    .then(|| u128::from_str_radix(t, 16).ok())
                    .flatten()
                    .ok_or_else(|| ListError::Digest(t.chars().take(40).collect()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ListWindow {
            first,
            len,
            digests,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(len: usize) -> Vec<u8> {
        (0..len as u64)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect()
    }

    fn sequential(d: &[u8]) -> ChunkList {
        let mut s = Sequential::default();
        s.update(d);
        s.finish()
    }

    #[test]
    fn root_covers_every_chunk_and_the_length() {
        let d = data(3 * CHUNK as usize + 17);
        let l = sequential(&d);
        assert_eq!(l.digests.len(), 4);
        // A chunk's own digest is XXH3-128 of its bytes.
        assert_eq!(l.digests[3], Xxh3::oneshot(&d[3 * CHUNK as usize..]));
        let mut trimmed = l.clone();
        trimmed.len -= 1;
        assert_ne!(trimmed.root(), l.root());
        let empty = sequential(&[]);
        assert!(empty.digests.is_empty());
        assert_eq!(empty.root_hex().len(), 32);
    }

    /// Vectors computed apart from this code (Python's `xxhash` package, following
    /// docs/protocol.md), so the definition cannot drift.
    #[test]
    fn known_vectors() {
        assert_eq!(
            sequential(&[]).root_hex(),
            "2c0a8a99dc147d5445c3b49d035665b2"
        );
        let d: Vec<u8> = (0..(5 * CHUNK / 2))
            .map(|i| (i * 131 % 251) as u8)
            .collect();
        assert_eq!(
            sequential(&d).root_hex(),
            "d3a1317b39fb21c46bdce7bab0655d05"
        );
    }

    #[test]
    fn reverse_order_blocks_match_the_sequential_digest() {
        let d = data(5 * CHUNK as usize + 1234);
        let c = Chunked::new();
        for (i, b) in d.chunks(CHUNK as usize).enumerate().rev() {
            c.update(i as u64 * CHUNK, b, &d);
        }
        assert_eq!(c.finish(d.len() as u64), Some(sequential(&d)));
    }

    #[test]
    fn blocks_smaller_than_a_chunk_in_any_order_are_read_back() {
        let d = data(2 * CHUNK as usize + 99);
        let c = Chunked::new();
        let blocks: Vec<_> = d.chunks(300_000).enumerate().collect();
        for &k in &[1, 0, 3, 2, 6, 5, 4] {
            let (i, b) = blocks[k];
            c.update(i as u64 * 300_000, b, &d);
        }
        assert_eq!(c.finish(d.len() as u64), Some(sequential(&d)));
    }

    #[test]
    fn gaps_and_repeats_leave_no_digest() {
        let d = data(2 * CHUNK as usize);
        let c = Chunked::new();
        c.update(0, &d[..CHUNK as usize], &d);
        assert_eq!(
            c.finish(d.len() as u64),
            None,
            "the second chunk is missing"
        );
        let c = Chunked::new();
        c.update(0, &d, &d);
        c.update(10, &d[10..20], &d);
        assert_eq!(c.finish(d.len() as u64), None, "bytes came twice");
    }

    #[test]
    fn a_flipped_byte_in_any_chunk_names_that_chunk() {
        let d = data(4 * CHUNK as usize + 5);
        let good = sequential(&d);
        for chunk in 0..5u64 {
            let mut bad = d.clone();
            let at = (chunk * CHUNK + 3) as usize;
            bad[at] ^= 0x40;
            let b = sequential(&bad);
            assert_ne!(b.root(), good.root());
            let want = (chunk * CHUNK, ((chunk + 1) * CHUNK).min(d.len() as u64));
            assert_eq!(b.differing(0, &good.digests), vec![want]);
            // A window of the list, as a CKSM XXHC-LIST reply gives it.
            assert_eq!(
                b.differing(chunk, &good.digests[chunk as usize..]),
                vec![want]
            );
        }
    }

    #[test]
    fn list_windows_round_trip_and_stop_at_the_bound() {
        let list = ChunkList {
            len: 5000 * CHUNK - 7,
            digests: (0..5000u128).map(|i| i * 0x9e37_79b9_7f4a_7c15).collect(),
        };
        let w = ListWindow::of(&list, 0, None);
        assert_eq!((w.first, w.digests.len() as u64), (0, MAX_LIST));
        assert_eq!(ListWindow::parse(&w.to_lines()), Ok(w.clone()));
        let rest = ListWindow::of(&list, MAX_LIST * CHUNK + 5, None);
        assert_eq!((rest.first, rest.digests.len()), (MAX_LIST, 904));
        let two = ListWindow::of(&list, 3 * CHUNK, Some(CHUNK + 1));
        assert_eq!((two.first, two.digests.len()), (3, 2));
        let past = ListWindow::of(&list, u64::MAX, Some(u64::MAX));
        assert!(past.digests.is_empty());
        assert_eq!(ListWindow::parse(&past.to_lines()), Ok(past));
    }

    #[test]
    fn bad_list_replies_are_refused() {
        let ok = ListWindow {
            first: 1,
            len: 3 * CHUNK,
            digests: vec![1, 2],
        }
        .to_lines();
        let edit = |i: usize, l: &str| {
            let mut v = ok.clone();
            v[i] = l.into();
            v
        };
        assert!(ListWindow::parse(&ok).is_ok());
        assert!(matches!(
            ListWindow::parse(&edit(0, "XXHC-LIST 1 2")),
            Err(ListError::Header(_))
        ));
        assert!(matches!(
            ListWindow::parse(&edit(0, "XXHC-LIST 2 2 3145728")),
            Err(ListError::Range { .. })
        ));
        assert!(matches!(
            ListWindow::parse(&edit(1, "xyz")),
            Err(ListError::Digest(_))
        ));
        assert!(matches!(
            ListWindow::parse(&ok[..2]),
            Err(ListError::Count { .. })
        ));
        assert!(ListWindow::parse(&[]).is_err());
    }
}
