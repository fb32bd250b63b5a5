//! File clusters and channel scheduling (§2.1–2.2 of 003-digest, Algs. 1–2 of 003): split a
//! dataset into Small / Middle / Large / Huge clusters by file size relative to the BDP, pick
//! pipelining and parallelism per cluster with the thesis heuristic, and hand out channels
//! Multi-Cluster style (round-robin) or ProMC style (by cluster size).

use serde::{Deserialize, Serialize};

use crate::TuneError;

/// Cluster classes, smallest files first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum FileClass {
    /// Files below `small_below`·BDP.
    Small,
    /// Files in [`small_below`, `middle_below`)·BDP.
    Middle,
    /// Files in [`middle_below`, `large_below`)·BDP.
    Large,
    /// Files at or above `large_below`·BDP.
    Huge,
}

/// MC's round-robin order (Alg. 1 of 003, line 9): Huge, Small, Large, Middle.
pub const MC_ORDER: [FileClass; 4] = [
    FileClass::Huge,
    FileClass::Small,
    FileClass::Large,
    FileClass::Middle,
];

/// Cut-offs as multiples of the BDP. The thesis's values are only in its lost Fig. 3.1; the
/// defaults (0.1, 1, 20) are haul's choice, documented in docs/tuning.md.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cutoffs {
    /// Small/Middle boundary (default BDP/10: pipelining ≥ 10 by Alg. 2).
    pub small_below: f64,
    /// Middle/Large boundary (default 1·BDP: where pipelining stops paying, Yildirim et al.).
    pub middle_below: f64,
    /// Large/Huge boundary (default 20·BDP).
    pub large_below: f64,
}

impl Default for Cutoffs {
    fn default() -> Self {
        Cutoffs {
            small_below: 0.1,
            middle_below: 1.0,
            large_below: 20.0,
        }
    }
}

impl Cutoffs {
    /// Checks 0 < small < middle < large, all finite.
    pub fn validate(&self) -> Result<(), TuneError> {
        let ok = self.small_below > 0.0
            && self.small_below < self.middle_below
            && self.middle_below < self.large_below
            && self.large_below.is_finite();
        if ok {
            Ok(())
        } else {
            Err(TuneError::BadParameter {
                name: "cutoffs",
                reason: format!("need 0 < small < middle < large (×BDP), got {self:?}"),
            })
        }
    }

    /// The class of a file of `size` bytes.
    pub fn classify(&self, size: u64, bdp: f64) -> FileClass {
        let r = size as f64 / bdp;
        if r < self.small_below {
            FileClass::Small
        } else if r < self.middle_below {
            FileClass::Middle
        } else if r < self.large_below {
            FileClass::Large
        } else {
            FileClass::Huge
        }
    }
}

/// Per-cluster transfer parameters from Alg. 2 of 003.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterParams {
    /// pp = BDP/avgFileSize, rounded, ≥ 1.
    pub pipelining: u32,
    /// p = min(⌈BDP/buffer⌉, ⌈avgFileSize/buffer⌉), ≥ 1.
    pub parallelism: u32,
}

/// One cluster: its class, the indices of its files in the input, and totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    /// Class.
    pub class: FileClass,
    /// Indices into the caller's file list.
    pub files: Vec<usize>,
    /// Sum of file sizes, bytes.
    pub bytes: u64,
    /// Heuristic pp and p.
    pub params: ClusterParams,
}

impl Cluster {
    /// Mean file size in bytes.
    pub fn avg_size(&self) -> f64 {
        self.bytes as f64 / self.files.len().max(1) as f64
    }
}

fn round_clamp(x: f64) -> u32 {
    if x.is_finite() {
        x.round().clamp(1.0, f64::from(u32::MAX)) as u32
    } else {
        1
    }
}

/// Alg. 2 of 003 (exact equations), rounded to integers and clamped to ≥ 1.
pub fn heuristic(avg_file_size: f64, bdp: f64, buffer: f64) -> ClusterParams {
    let pipelining = round_clamp(bdp / avg_file_size);
    let parallelism = round_clamp((bdp / buffer).ceil().min((avg_file_size / buffer).ceil()));
    ClusterParams {
        pipelining,
        parallelism,
    }
}

/// Splits `sizes` (bytes) into non-empty clusters ordered Small → Huge (Alg. 1 of 003).
pub fn partition(
    sizes: &[u64],
    bdp: f64,
    buffer: f64,
    cutoffs: &Cutoffs,
) -> Result<Vec<Cluster>, TuneError> {
    cutoffs.validate()?;
    if !(bdp.is_finite() && bdp > 0.0 && buffer.is_finite() && buffer > 0.0) {
        return Err(TuneError::BadParameter {
            name: "bdp/buffer",
            reason: format!("need positive finite BDP and buffer, got {bdp} and {buffer}"),
        });
    }
    let classes = [
        FileClass::Small,
        FileClass::Middle,
        FileClass::Large,
        FileClass::Huge,
    ];
    let mut out = Vec::new();
    for class in classes {
        let files: Vec<usize> = sizes
            .iter()
            .enumerate()
            .filter(|(_, &s)| cutoffs.classify(s, bdp) == class)
            .map(|(i, _)| i)
            .collect();
        if files.is_empty() {
            continue;
        }
        let bytes = files
            .iter()
            .map(|&i| sizes[i])
            .fold(0u64, u64::saturating_add);
        let avg = (bytes as f64 / files.len() as f64).max(1.0);
        out.push(Cluster {
            class,
            files,
            bytes,
            params: heuristic(avg, bdp, buffer),
        });
    }
    Ok(out)
}

/// How channels are divided among clusters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Policy {
    /// Multi-Cluster: round-robin in [`MC_ORDER`] (Alg. 1 of 003).
    MultiCluster,
    /// ProMC: proportional to each cluster's remaining bytes (largest remainder), ≥ 1 each while
    /// channels last.
    ProMc,
}

/// A live channel allocation over the clusters still running.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    policy: Policy,
    /// (class, remaining bytes, channels), in [`MC_ORDER`].
    slots: Vec<(FileClass, u64, u32)>,
    total: u32,
}

impl Allocation {
    /// Distributes `channels` among `clusters` by `policy`.
    pub fn new(clusters: &[Cluster], channels: u32, policy: Policy) -> Allocation {
        let mut slots: Vec<(FileClass, u64, u32)> = MC_ORDER
            .iter()
            .filter_map(|c| {
                clusters
                    .iter()
                    .find(|k| k.class == *c)
                    .map(|k| (k.class, k.bytes, 0))
            })
            .collect();
        distribute(&mut slots, channels, policy);
        Allocation {
            policy,
            slots,
            total: channels,
        }
    }

    /// Channels of `class` (0 if absent or finished).
    pub fn channels(&self, class: FileClass) -> u32 {
        self.slots.iter().find(|s| s.0 == class).map_or(0, |s| s.2)
    }

    /// (class, channels) for clusters still running, in MC order.
    pub fn shares(&self) -> Vec<(FileClass, u32)> {
        self.slots.iter().map(|s| (s.0, s.2)).collect()
    }

    /// Updates a cluster's remaining bytes (ProMC re-weights on the next reallocation).
    pub fn set_remaining(&mut self, class: FileClass, bytes: u64) {
        if let Some(s) = self.slots.iter_mut().find(|s| s.0 == class) {
            s.1 = bytes;
        }
    }

    /// Changes the total channel budget (e.g. when Alg. 3 picks a new concurrency).
    pub fn resize(&mut self, channels: u32) {
        self.total = channels;
        distribute(&mut self.slots, channels, self.policy);
    }

    /// A cluster finished: its channels go to the clusters still running.
    pub fn finish(&mut self, class: FileClass) {
        self.slots.retain(|s| s.0 != class);
        distribute(&mut self.slots, self.total, self.policy);
    }
}

fn distribute(slots: &mut [(FileClass, u64, u32)], channels: u32, policy: Policy) {
    for s in slots.iter_mut() {
        s.2 = 0;
    }
    if slots.is_empty() {
        return;
    }
    match policy {
        Policy::MultiCluster => {
            for i in 0..channels as usize {
                let n = slots.len();
                slots[i % n].2 += 1;
            }
        }
        Policy::ProMc => {
            let n = slots.len() as u32;
            // Everyone running gets one channel first (while they last), the rest by bytes.
            let base = n.min(channels);
            for s in slots.iter_mut().take(base as usize) {
                s.2 = 1;
            }
            let left = channels - base;
            let total: f64 = slots.iter().map(|s| s.1 as f64).sum();
            if left == 0 {
                return;
            }
            let weights: Vec<f64> = slots
                .iter()
                .map(|s| {
                    if total > 0.0 {
                        s.1 as f64 / total
                    } else {
                        1.0 / f64::from(n)
                    }
                })
                .collect();
            let mut given = 0;
            let mut rem: Vec<(usize, f64)> = Vec::new();
            for (i, w) in weights.iter().enumerate() {
                let exact = w * f64::from(left);
                let whole = exact.floor() as u32;
                slots[i].2 += whole;
                given += whole;
                rem.push((i, exact - f64::from(whole)));
            }
            rem.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            for (i, _) in rem.into_iter().take((left - given) as usize) {
                slots[i].2 += 1;
            }
        }
    }
}
