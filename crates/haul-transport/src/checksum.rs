//! Checksums of data as it moves, for end-to-end verification and GridFTP's CKSM command, used
//! by the server and the client alike: the algorithms, incremental hashers, a hasher that takes
//! blocks in any order ([`Running`]), and a [`Source`] and a [`Sink`](crate::io::Sink) that hash what passes
//! through them. MD5, ADLER32, SHA1, SHA256 and SHA512 interoperate with Globus (CRC32C with
//! other GridFTP servers); XXH128 and XXHC are haul's fast digests between haul peers.

use std::fmt;
use std::str::FromStr;

use crate::io::Source;
use md5::Digest;

pub mod chunked;
mod hashing;

pub use hashing::{Finished, HashingSink, HashingSource};

/// A checksum algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Algorithm {
    /// MD5 (RFC 1321), Globus's default for `-verify-checksum`.
    Md5,
    /// Adler-32 (RFC 1950).
    Adler32,
    /// CRC-32C (Castagnoli).
    Crc32c,
    /// XXH3 128-bit: non-cryptographic, several GB/s per core.
    Xxh128,
    /// XXH3-128 over 1 MiB chunks ([`chunked`]): hashed in any order while the bytes pass, so
    /// neither end reads the file twice; haul's default between peers.
    Xxhc,
    /// SHA-1 (FIPS 180-4), as Globus offers it.
    Sha1,
    /// SHA-256 (FIPS 180-4).
    Sha256,
    /// SHA-512 (FIPS 180-4).
    Sha512,
}

impl Algorithm {
    /// Every algorithm, in the order FEAT advertises them.
    pub const ALL: [Algorithm; 8] = [
        Algorithm::Md5,
        Algorithm::Adler32,
        Algorithm::Crc32c,
        Algorithm::Xxh128,
        Algorithm::Xxhc,
        Algorithm::Sha1,
        Algorithm::Sha256,
        Algorithm::Sha512,
    ];

    /// The CKSM name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Md5 => "MD5",
            Algorithm::Adler32 => "ADLER32",
            Algorithm::Crc32c => "CRC32C",
            Algorithm::Xxh128 => "XXH128",
            Algorithm::Xxhc => "XXHC",
            Algorithm::Sha1 => "SHA1",
            Algorithm::Sha256 => "SHA256",
            Algorithm::Sha512 => "SHA512",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown algorithm name.
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown checksum algorithm {0:?} (known: MD5, ADLER32, CRC32C, XXH128, XXHC, SHA1, SHA256, SHA512)"
)]
pub struct UnknownAlgorithm(pub String);

impl FromStr for Algorithm {
    type Err = UnknownAlgorithm;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_uppercase().as_str() {
            "MD5" => Ok(Algorithm::Md5),
            "ADLER32" | "ADLER-32" => Ok(Algorithm::Adler32),
            "CRC32C" | "CRC-32C" => Ok(Algorithm::Crc32c),
            "XXH128" | "XXH3" | "XXH3-128" => Ok(Algorithm::Xxh128),
            "XXHC" => Ok(Algorithm::Xxhc),
            "SHA1" | "SHA-1" => Ok(Algorithm::Sha1),
            "SHA256" | "SHA-256" => Ok(Algorithm::Sha256),
            "SHA512" | "SHA-512" => Ok(Algorithm::Sha512),
            _ => Err(UnknownAlgorithm(s.to_string())),
        }
    }
}

/// An incremental hasher for one algorithm.
pub enum Hasher {
    /// MD5 state.
    Md5(Box<md5::Md5>),
    /// Adler-32 state.
    Adler(adler::Adler32),
    /// CRC-32C state.
    Crc(u32),
    /// XXH3-128 state.
    Xxh(Box<twox_hash::XxHash3_128>),
    /// XXHC state, fed in file order.
    Xxhc(Box<chunked::Sequential>),
    /// SHA-1 state.
    Sha1(Box<sha1::Sha1>),
    /// SHA-256 state.
    Sha256(Box<sha2::Sha256>),
    /// SHA-512 state.
    Sha512(Box<sha2::Sha512>),
}

impl Hasher {
    /// A fresh hasher.
    pub fn new(alg: Algorithm) -> Hasher {
        match alg {
            Algorithm::Md5 => Hasher::Md5(Box::default()),
            Algorithm::Adler32 => Hasher::Adler(adler::Adler32::new()),
            Algorithm::Crc32c => Hasher::Crc(0),
            Algorithm::Xxh128 => Hasher::Xxh(Box::default()),
            Algorithm::Xxhc => Hasher::Xxhc(Box::default()),
            Algorithm::Sha1 => Hasher::Sha1(Box::default()),
            Algorithm::Sha256 => Hasher::Sha256(Box::default()),
            Algorithm::Sha512 => Hasher::Sha512(Box::default()),
        }
    }

    /// Feeds bytes in order.
    pub fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Md5(h) => h.update(data),
            Hasher::Adler(h) => h.write_slice(data),
            Hasher::Crc(c) => *c = crc32c::crc32c_append(*c, data),
            Hasher::Xxh(h) => h.write(data),
            Hasher::Xxhc(h) => h.update(data),
            Hasher::Sha1(h) => h.update(data),
            Hasher::Sha256(h) => h.update(data),
            Hasher::Sha512(h) => h.update(data),
        }
    }

    /// The digest as lowercase hex (the CKSM reply format).
    pub fn finish_hex(self) -> String {
        match self {
            Hasher::Md5(h) => hex(&h.finalize()),
            Hasher::Adler(h) => format!("{:08x}", h.checksum()),
            Hasher::Crc(c) => format!("{c:08x}"),
            Hasher::Xxh(h) => format!("{:032x}", h.finish_128()),
            Hasher::Xxhc(h) => h.finish().root_hex(),
            Hasher::Sha1(h) => hex(&h.finalize()),
            Hasher::Sha256(h) => hex(&h.finalize()),
            Hasher::Sha512(h) => hex(&h.finalize()),
        }
    }
}

/// Lowercase hex of a digest's bytes.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Read size of [`checksum`]: large enough that syscalls vanish, small enough to stay in cache.
const READ_SIZE: usize = 256 << 10;

thread_local! {
    /// [`checksum`]'s read buffer, kept per thread: a server answering CKSM for thousands of
    /// small files should not allocate and zero a buffer for each.
    static READ_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Checksums `length` bytes (to the end when None) of `src` from `offset`.
pub fn checksum(
    src: &dyn Source,
    alg: Algorithm,
    offset: u64,
    length: Option<u64>,
) -> std::io::Result<String> {
    let mut h = Hasher::new(alg);
    let end = length.map(|l| offset.saturating_add(l));
    feed(&mut h, src, offset, end)?;
    Ok(h.finish_hex())
}

/// Hashes `src` from `at` to `end` (to the end of the source when None); returns where it
/// stopped.
fn feed(h: &mut Hasher, src: &dyn Source, mut at: u64, end: Option<u64>) -> std::io::Result<u64> {
    let mut buf = READ_BUF.with(|b| b.take());
    if buf.len() < READ_SIZE {
        buf.resize(READ_SIZE, 0);
    }
    let r = (|| loop {
        let want = match end {
            Some(e) if at >= e => return Ok(at),
            Some(e) => ((e - at) as usize).min(buf.len()),
            None => buf.len(),
        };
        let n = src.read_at(&mut buf[..want], at)?;
        if n == 0 {
            return Ok(at);
        }
        h.update(&buf[..n]);
        at += n as u64;
    })();
    READ_BUF.with(|b| *b.borrow_mut() = buf);
    r
}

/// A digest computed from bytes as they pass by, at whatever offsets they come: bytes that
/// continue the hashed prefix are hashed at once (the common case: one stream, blocks in order);
/// bytes beyond it are noted and hashed later by reading them back from the copy they were
/// written to or read from ([`Running::catch_up`]). Bytes handed over twice for a range already
/// hashed make the result unusable, since the copy may no longer match what was hashed.
pub struct Running {
    hasher: Hasher,
    next: u64,
    ahead: std::collections::BTreeMap<u64, u64>,
    broken: bool,
}

impl Running {
    /// A fresh digest of `alg`.
    pub fn new(alg: Algorithm) -> Running {
        Running::at(alg, 0)
    }

    /// A fresh digest of `alg` over bytes from offset `start` on.
    pub fn at(alg: Algorithm, start: u64) -> Running {
        Running {
            hasher: Hasher::new(alg),
            next: start,
            ahead: Default::default(),
            broken: false,
        }
    }

    /// Where the hashed prefix ends.
    pub fn hashed_to(&self) -> u64 {
        self.next
    }

    /// Notes bytes `data` at `offset`; hashes them now if they continue the hashed prefix.
    pub fn update(&mut self, offset: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let end = offset + data.len() as u64;
        if offset == self.next {
            self.hasher.update(data);
            self.next = end;
        } else if offset > self.next {
            let e = self.ahead.entry(offset).or_insert(end);
            *e = (*e).max(end);
        } else {
            self.broken = true;
        }
    }

    /// True when bytes noted beyond the prefix now continue it and wait for [`Running::catch_up`].
    pub fn behind(&self) -> bool {
        self.ahead
            .first_key_value()
            .is_some_and(|(&s, _)| s <= self.next)
    }

    /// Hashes the noted bytes that continue the prefix, reading them from `copy`.
    pub fn catch_up(&mut self, copy: &dyn Source) -> std::io::Result<()> {
        while let Some((&s, &e)) = self.ahead.first_key_value() {
            if s > self.next {
                break;
            }
            self.ahead.remove(&s);
            if e > self.next {
                // Should reading fail, the digest no longer stands for a prefix.
                let at = feed(&mut self.hasher, copy, self.next, Some(e))
                    .inspect_err(|_| self.broken = true)?;
                if at < e {
                    self.broken = true;
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("copy ended at {at}, before {e}"),
                    ));
                }
                self.next = e;
            }
        }
        Ok(())
    }

    /// The digest of bytes `[0, len)`, or None unless exactly those were hashed, each once.
    pub fn finish(self, len: u64) -> Option<String> {
        self.into_hasher(len).map(Hasher::finish_hex)
    }

    /// The hasher, once exactly the bytes from the start to `end` were hashed, each once.
    pub fn into_hasher(self, end: u64) -> Option<Hasher> {
        (!self.broken && self.next == end && self.ahead.is_empty()).then_some(self.hasher)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::Sink;

    fn of(alg: Algorithm, data: &[u8]) -> String {
        let mut h = Hasher::new(alg);
        h.update(data);
        h.finish_hex()
    }

    #[test]
    fn known_vectors() {
        assert_eq!(
            of(Algorithm::Md5, b"abc"),
            "900150983cd24fb0d6963f7d28e17f72"
        );
        assert_eq!(of(Algorithm::Adler32, b"Wikipedia"), "11e60398");
        assert_eq!(of(Algorithm::Crc32c, b"123456789"), "e3069283");
        assert_eq!(
            of(Algorithm::Xxh128, b""),
            "99aa06d3014798d86001c324468d497f"
        );
        // Long enough for the vector loop, fed in uneven pieces; the value is xxhash-rust's,
        // an implementation apart from the one haul uses.
        let long: Vec<u8> = (0..100_000u32).map(|i| (i * 131 % 251) as u8).collect();
        let mut h = Hasher::new(Algorithm::Xxh128);
        for piece in long.chunks(7_777) {
            h.update(piece);
        }
        assert_eq!(h.finish_hex(), "e71185eadf3c8e17e870c3db450b9247");
        // FIPS 180-4's "abc" examples.
        assert_eq!(
            of(Algorithm::Sha1, b"abc"),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            of(Algorithm::Sha256, b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            of(Algorithm::Sha512, b"abc"),
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a\
             2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
        );
        for (name, alg) in [
            ("sha-1", Algorithm::Sha1),
            ("Sha256", Algorithm::Sha256),
            ("SHA-512", Algorithm::Sha512),
        ] {
            assert_eq!(name.parse::<Algorithm>().unwrap(), alg);
        }
    }

    #[test]
    fn ranges_and_names() {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), b"xxabcxx").unwrap();
        let file = std::fs::File::open(f.path()).unwrap();
        assert_eq!(
            checksum(&file, Algorithm::Md5, 2, Some(3)).unwrap(),
            of(Algorithm::Md5, b"abc")
        );
        assert_eq!(
            checksum(&file, Algorithm::Md5, 0, None).unwrap(),
            of(Algorithm::Md5, b"xxabcxx")
        );
        for a in Algorithm::ALL {
            assert_eq!(a.name().parse::<Algorithm>().unwrap(), a);
        }
        assert!("sha3".parse::<Algorithm>().is_err());
    }

    #[test]
    fn running_in_any_order() {
        let data: Vec<u8> = (0..700_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let copy = data.clone();
        let want = of(Algorithm::Xxh128, &data);
        // In order, in uneven pieces.
        let mut r = Running::new(Algorithm::Xxh128);
        for (i, c) in data.chunks(65_521).enumerate() {
            r.update(i as u64 * 65_521, c);
            assert!(!r.behind());
        }
        assert_eq!(r.finish(data.len() as u64).as_deref(), Some(want.as_str()));
        // Out of order: later pieces are read back from the copy once the gap is filled.
        let mut r = Running::new(Algorithm::Xxh128);
        let pieces: Vec<(u64, &[u8])> = data
            .chunks(100_000)
            .enumerate()
            .map(|(i, c)| (i as u64 * 100_000, c))
            .collect();
        for &k in &[2, 1, 4, 0, 3, 6, 5] {
            let (o, c) = pieces[k];
            r.update(o, c);
            if r.behind() {
                r.catch_up(&copy).unwrap();
            }
        }
        assert_eq!(r.finish(data.len() as u64).as_deref(), Some(want.as_str()));
        // A gap, a short copy, or bytes given twice: no digest.
        let mut r = Running::new(Algorithm::Xxh128);
        r.update(0, &data[..10]);
        r.update(20, &data[20..30]);
        assert_eq!(r.finish(30), None);
        let mut r = Running::new(Algorithm::Xxh128);
        r.update(0, &data[..10]);
        r.update(5, &data[5..15]);
        assert_eq!(r.finish(15), None);
        let mut r = Running::new(Algorithm::Xxh128);
        r.update(10, &data[10..20]);
        r.update(0, &data[..10]);
        assert!(r.catch_up(&data[..15].to_vec()).is_err());
        r.update(20, &data[20..30]);
        assert_eq!(r.finish(30), None);
    }

    /// Blocks written in any order: the digest is the file's, without reading back more than
    /// the blocks that came early.
    #[test]
    fn hashing_sink_matches_the_file() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("f.haul-part");
        let file = std::fs::File::create(&path).unwrap();
        let data: Vec<u8> = (0..1_000_003u32).map(|i| (i % 253) as u8).collect();
        let sink = HashingSink::new(&file, Algorithm::Xxh128, &path);
        let blocks: Vec<(u64, &[u8])> = data
            .chunks(131_072)
            .enumerate()
            .map(|(i, c)| (i as u64 * 131_072, c))
            .collect();
        for &k in &[0, 3, 1, 2, 7, 5, 6, 4] {
            sink.write_at(blocks[k].1, blocks[k].0).unwrap();
        }
        let got = sink.finish(data.len() as u64).unwrap();
        assert_eq!(
            got.unwrap(),
            checksum(
                &std::fs::File::open(&path).unwrap(),
                Algorithm::Xxh128,
                0,
                None
            )
            .unwrap()
        );
        // Short of the expected length: no digest, so the caller hashes the file instead.
        let sink = HashingSink::new(&file, Algorithm::Xxh128, &path);
        sink.write_at(&data[..100], 0).unwrap();
        assert_eq!(sink.finish(200).unwrap(), None);
    }

    /// A block that came early cannot be read back (here the path is wrong): the write still
    /// succeeds and only the digest is lost.
    #[test]
    fn a_failed_read_back_costs_the_digest_not_the_write() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("f.haul-part");
        let file = std::fs::File::create(&path).unwrap();
        let data = vec![9u8; 300_000];
        let gone = d.path().join("renamed-away");
        let sink = HashingSink::new(&file, Algorithm::Xxh128, &gone);
        sink.write_at(&data[150_000..], 150_000).unwrap();
        sink.write_at(&data[..150_000], 0).unwrap();
        assert_eq!(sink.finish(data.len() as u64).unwrap(), None);
        assert_eq!(
            std::fs::read(&path).unwrap(),
            data,
            "every byte was written"
        );
    }
}
