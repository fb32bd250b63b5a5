//! File checksums for end-to-end verification and GridFTP's CKSM command. MD5, ADLER32 and
//! CRC32C interoperate with Globus; XXH128 is haul's fast default between haul peers.

use std::fmt;
use std::str::FromStr;

use haul_transport::io::Source;
use md5::Digest;
use std::os::unix::fs::FileExt;

/// A checksum algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Algorithm {
    /// MD5 (RFC 1321), Globus's default for `-verify-checksum`.
    Md5,
    /// Adler-32 (RFC 1950).
    Adler32,
    /// CRC-32C (Castagnoli).
    Crc32c,
    /// XXH3 128-bit: non-cryptographic, several GB/s per core; haul's default between peers.
    Xxh128,
}

impl Algorithm {
    /// Every algorithm, in the order FEAT advertises them.
    pub const ALL: [Algorithm; 4] = [Algorithm::Md5, Algorithm::Adler32, Algorithm::Crc32c, Algorithm::Xxh128];

    /// The CKSM name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Md5 => "MD5",
            Algorithm::Adler32 => "ADLER32",
            Algorithm::Crc32c => "CRC32C",
            Algorithm::Xxh128 => "XXH128",
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
#[error("unknown checksum algorithm {0:?} (known: MD5, ADLER32, CRC32C, XXH128)")]
pub struct UnknownAlgorithm(pub String);

impl FromStr for Algorithm {
    type Err = UnknownAlgorithm;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_uppercase().as_str() {
            "MD5" => Ok(Algorithm::Md5),
            "ADLER32" | "ADLER-32" => Ok(Algorithm::Adler32),
            "CRC32C" | "CRC-32C" => Ok(Algorithm::Crc32c),
            "XXH128" | "XXH3" | "XXH3-128" => Ok(Algorithm::Xxh128),
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
    Xxh(Box<xxhash_rust::xxh3::Xxh3>),
}

impl Hasher {
    /// A fresh hasher.
    pub fn new(alg: Algorithm) -> Hasher {
        match alg {
            Algorithm::Md5 => Hasher::Md5(Box::default()),
            Algorithm::Adler32 => Hasher::Adler(adler::Adler32::new()),
            Algorithm::Crc32c => Hasher::Crc(0),
            Algorithm::Xxh128 => Hasher::Xxh(Box::default()),
        }
    }

    /// Feeds bytes in order.
    pub fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Md5(h) => h.update(data),
            Hasher::Adler(h) => h.write_slice(data),
            Hasher::Crc(c) => *c = crc32c::crc32c_append(*c, data),
            Hasher::Xxh(h) => h.update(data),
        }
    }

    /// The digest as lowercase hex (the CKSM reply format).
    pub fn finish_hex(self) -> String {
        match self {
            Hasher::Md5(h) => h.finalize().iter().map(|b| format!("{b:02x}")).collect(),
            Hasher::Adler(h) => format!("{:08x}", h.checksum()),
            Hasher::Crc(c) => format!("{c:08x}"),
            Hasher::Xxh(h) => format!("{:032x}", h.digest128()),
        }
    }
}

/// Checksums `length` bytes (to the end when None) of `src` from `offset`.
pub fn checksum(src: &dyn Source, alg: Algorithm, offset: u64, length: Option<u64>) -> std::io::Result<String> {
    let mut h = Hasher::new(alg);
    let mut buf = vec![0u8; 1 << 20];
    let mut at = offset;
    let end = length.map(|l| offset.saturating_add(l));
    loop {
        let want = match end {
            Some(e) if at >= e => break,
            Some(e) => ((e - at) as usize).min(buf.len()),
            None => buf.len(),
        };
        let n = src.read_at(&mut buf[..want], at)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        at += n as u64;
    }
    Ok(h.finish_hex())
}

/// Hashes a file that is still being written, following the contiguous prefix that
/// `written()` reports, so the digest is ready moments after the last byte lands. `finished`
/// turns true once no more bytes will come; then the rest of the file is hashed.
pub fn follow(
    path: &std::path::Path,
    alg: Algorithm,
    written: &dyn Fn() -> u64,
    finished: &std::sync::atomic::AtomicBool,
) -> Result<String, crate::XferError> {
    use std::sync::atomic::Ordering;
    let what = || path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| crate::XferError::io(&what(), e))?;
    let mut h = Hasher::new(alg);
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    loop {
        let done = finished.load(Ordering::Acquire);
        let limit = if done { u64::MAX } else { written() };
        if at < limit {
            let want = ((limit - at).min(buf.len() as u64)) as usize;
            let n = FileExt::read_at(&f, &mut buf[..want], at).map_err(|e| crate::XferError::io(&what(), e))?;
            if n == 0 && done {
                break;
            }
            h.update(&buf[..n]);
            at += n as u64;
        } else if done {
            break;
        } else {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    Ok(h.finish_hex())
}

/// Checksums a whole local file; errors name the path.
pub fn checksum_path(path: &std::path::Path, alg: Algorithm) -> Result<String, crate::XferError> {
    let f = std::fs::File::open(path).map_err(|e| crate::XferError::io(&path.display().to_string(), e))?;
    checksum(&f, alg, 0, None).map_err(|e| crate::XferError::io(&path.display().to_string(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(alg: Algorithm, data: &[u8]) -> String {
        let mut h = Hasher::new(alg);
        h.update(data);
        h.finish_hex()
    }

    #[test]
    fn known_vectors() {
        assert_eq!(of(Algorithm::Md5, b"abc"), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(of(Algorithm::Adler32, b"Wikipedia"), "11e60398");
        assert_eq!(of(Algorithm::Crc32c, b"123456789"), "e3069283");
        assert_eq!(of(Algorithm::Xxh128, b""), "99aa06d3014798d86001c324468d497f");
    }

    #[test]
    fn ranges_and_names() {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), b"xxabcxx").unwrap();
        let file = std::fs::File::open(f.path()).unwrap();
        assert_eq!(checksum(&file, Algorithm::Md5, 2, Some(3)).unwrap(), of(Algorithm::Md5, b"abc"));
        assert_eq!(checksum(&file, Algorithm::Md5, 0, None).unwrap(), of(Algorithm::Md5, b"xxabcxx"));
        for a in Algorithm::ALL {
            assert_eq!(a.name().parse::<Algorithm>().unwrap(), a);
        }
        assert!("sha3".parse::<Algorithm>().is_err());
    }
}
