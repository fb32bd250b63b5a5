//! An on-path adversary for the simulator: alongside real datagrams it injects malformed,
//! truncated, forged-sequence, forged-offset, bad-length, foreign-session and replayed copies
//! towards the receiver, and malformed, truncated, forged, foreign and replayed ACKs towards
//! the sender. It keeps count of what it sent, by kind, so tests can check every one was
//! dropped and counted.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// What the adversary injected, by where it went and whether it was a same-session replay.
#[derive(Debug, Default, Clone, Copy)]
pub struct Injected {
    /// Bad datagrams (not replays) towards the receiver.
    pub to_receiver: u64,
    /// Same-session replays of earlier DATA towards the receiver.
    pub replays: u64,
    /// Bad or replayed ACKs towards the sender.
    pub to_sender: u64,
}

pub struct Adversary {
    rng: StdRng,
    count: u64,
    payload: u64,
    old_data: Vec<Vec<u8>>,
    old_acks: Vec<Vec<u8>>,
    injected: Injected,
}

impl Adversary {
    pub fn new(seed: u64, size: u64, payload: usize) -> Adversary {
        let payload = payload as u64;
        Adversary {
            rng: StdRng::seed_from_u64(seed),
            count: size.div_ceil(payload),
            payload,
            old_data: Vec::new(),
            old_acks: Vec::new(),
            injected: Injected::default(),
        }
    }

    pub fn injected(&self) -> Injected {
        self.injected
    }

    fn remember(rng: &mut StdRng, store: &mut Vec<Vec<u8>>, d: &[u8]) {
        if store.len() < 64 {
            store.push(d.to_vec());
        } else if rng.gen_bool(0.05) {
            let i = rng.gen_range(0..store.len());
            store[i] = d.to_vec();
        }
    }

    /// Maybe returns a bad datagram to deliver to the receiver next to `real`.
    pub fn against_receiver(&mut self, p: f64, real: &[u8]) -> Option<Vec<u8>> {
        Self::remember(&mut self.rng, &mut self.old_data, real);
        if p == 0.0 || !self.rng.gen_bool(p) {
            return None;
        }
        let mut d = real.to_vec();
        match self.rng.gen_range(0..7) {
            0 => {
                d = (0..self.rng.gen_range(0..120))
                    .map(|_| self.rng.gen())
                    .collect()
            }
            1 => d.truncate(self.rng.gen_range(0..real.len())),
            2 => {
                let seq = self.count + self.rng.gen_range(0..1000u64);
                d[12..20].copy_from_slice(&seq.to_be_bytes());
                d[20..28].copy_from_slice(&(seq * self.payload).to_be_bytes());
            }
            3 => {
                let offset = u64::from_be_bytes(d[20..28].try_into().expect("8 bytes")) + 1;
                d[20..28].copy_from_slice(&offset.to_be_bytes());
            }
            4 => {
                // Shorter payload with a consistent length field: parses, but is not this
                // sequence number's length.
                let len = u16::from_be_bytes([d[36], d[37]]).saturating_sub(1);
                d[36..38].copy_from_slice(&len.to_be_bytes());
                d.pop();
            }
            5 => d[4] ^= 0x80,
            _ => {
                let i = self.rng.gen_range(0..self.old_data.len());
                self.injected.replays += 1;
                return Some(self.old_data[i].clone());
            }
        }
        self.injected.to_receiver += 1;
        Some(d)
    }

    /// Maybe returns a bad ACK to deliver to the sender next to `real`.
    pub fn against_sender(&mut self, p: f64, real: &[u8]) -> Option<Vec<u8>> {
        Self::remember(&mut self.rng, &mut self.old_acks, real);
        if p == 0.0 || !self.rng.gen_bool(p) {
            return None;
        }
        let mut d = real.to_vec();
        match self.rng.gen_range(0..5) {
            0 => {
                d = (0..self.rng.gen_range(0..120))
                    .map(|_| self.rng.gen())
                    .collect()
            }
            1 => d.truncate(self.rng.gen_range(0..real.len())),
            2 => {
                // Acknowledges datagrams far beyond anything sent.
                let high = u64::from_be_bytes(d[28..36].try_into().expect("8 bytes")) + (1 << 40);
                d[28..36].copy_from_slice(&high.to_be_bytes());
            }
            3 => d[11] ^= 0x01,
            _ => {
                let i = self.rng.gen_range(0..self.old_acks.len());
                d = self.old_acks[i].clone();
            }
        }
        self.injected.to_sender += 1;
        Some(d)
    }
}
