//! The fuzz input of `client_transfers`: the window, the files, the server's replies and the
//! driver's decisions.

use std::collections::VecDeque;

use haul_proto::client::{Direction, FileOp};
use haul_proto::command::Restart;
use haul_proto::{Command, RangeSet, Reply};

use crate::common::replies;

/// The checksum algorithms a file may ask for.
const ALGORITHMS: [&str; 4] = ["MD5", "ADLER32", "CRC32C", "SHA256"];

/// ERET ranges a file may ask for.
const ERET: [(u64, u64); 4] = [(0, 0), (1, 2), (5, 1 << 20), (u64::MAX - 1, u64::MAX)];

/// Ranges a `REST` may name besides the file's own tag range.
const RANGES: [&[(u64, u64)]; 4] = [&[], &[(0, 100)], &[(0, 100), (200, 300)], &[(0, 1), (5, 9)]];

/// What one input asks for.
pub struct Input<'a> {
    pub window: usize,
    pub ops: Vec<FileOp>,
    /// How many of `ops` are pushed before the first step; the driver pushes the rest.
    pub early: usize,
    pub replies: VecDeque<Reply>,
    pub decisions: Decisions<'a>,
}

/// Decodes `data`: a header byte (bits 0-2: window 1-8, bits 3-5: 0-7 files, bits 6-7: how
/// many of them the driver pushes later), one byte per file (bit 0: `STOR` rather than `RETR`,
/// bit 1: `ERET`, bit 2: `REST`, bit 3: `CKSM`, bits 4-5: `REST`'s ranges, bits 6-7: `ERET`'s
/// range and `CKSM`'s algorithm; missing bytes are 0), then the server's bytes up to the first
/// `0xFF` and the driver's decisions after it.
pub fn decode(data: &[u8]) -> Input<'_> {
    let (&head, rest) = data.split_first().unwrap_or((&0, &[]));
    let n = usize::from(head >> 3 & 7);
    let late = usize::from(head >> 6).min(n);
    let (op_bytes, rest) = rest.split_at(n.min(rest.len()));
    let ops = (0..n)
        .map(|i| file_op(i, op_bytes.get(i).copied().unwrap_or(0)))
        .collect();
    let (server, decisions) = match rest.iter().position(|&b| b == 0xFF) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &[][..]),
    };
    Input {
        window: usize::from(head & 7) + 1,
        ops,
        early: n - late,
        replies: replies(server).into(),
        decisions: Decisions(decisions),
    }
}

/// File `i`'s operation: its path is `/f<i>`, and its `REST` ranges hold `[(i+1)·2³², +1)`, so
/// every command written names exactly one file.
fn file_op(i: usize, b: u8) -> FileOp {
    let direction = if b & 1 == 0 {
        Direction::Get
    } else {
        Direction::Put
    };
    let mut op = FileOp::new(direction, format!("/f{i}"));
    let extra = usize::from(b >> 6);
    op.eret = (b & 2 != 0).then_some(ERET[extra]);
    if b & 4 != 0 {
        let mut set = RangeSet::new();
        let tag = (i as u64 + 1) << 32;
        set.insert(tag, tag + 1);
        for &(start, end) in RANGES[usize::from(b >> 4 & 3)] {
            set.insert(start, end);
        }
        op.restart = Some(set);
    }
    op.cksm = (b & 8 != 0).then(|| ALGORITHMS[extra].to_string());
    op
}

/// The commands that move `op`, in the order they must be written, and the index of the
/// transfer command among them.
pub fn commands(op: &FileOp) -> (Vec<Command>, usize) {
    let mut out = Vec::new();
    if let Some(ranges) = &op.restart {
        out.push(Command::Rest(Restart::Ranges(ranges.clone())));
    }
    let path = op.path.clone();
    let at = out.len();
    out.push(match (op.direction, op.eret) {
        (Direction::Get, Some((offset, length))) => Command::Eret {
            offset,
            length,
            path: path.clone(),
        },
        (Direction::Get, None) => Command::Retr(path.clone()),
        (Direction::Put, _) => Command::Stor(path.clone()),
    });
    if let Some(algorithm) = &op.cksm {
        out.push(Command::Cksm {
            algorithm: algorithm.clone(),
            offset: 0,
            length: None,
            path,
        });
    }
    (out, at)
}

/// The driver's decisions, one per step; None once they run out.
pub struct Decisions<'a>(&'a [u8]);

impl Decisions<'_> {
    pub fn next(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
}
