//! The engine's work queues (issue 6, §2.1–2.2 of 003-digest): either one queue with the
//! user's pipelining and parallelism, or one lane per file-size cluster with the thesis's
//! per-cluster heuristic, its channels handed out Multi-Cluster style (round-robin) or ProMC
//! style (by remaining bytes). A lane whose queue runs dry gives its channels to the lanes
//! still holding files, and a slot whose lane is empty takes work from any lane, so no channel
//! idles while files wait.

use std::collections::VecDeque;

use haul_tune::cluster::{self, Allocation, Cutoffs, FileClass, Policy};

use crate::path::PathEstimate;
use crate::plan::{self, Job, Piece};

/// The largest pipelining depth a cluster gets. Alg. 2's BDP/avgFileSize is unbounded for tiny
/// files (5 MB BDP / 1 KB files = 5,000); past a few dozen commands in flight the control
/// channel is no longer the bottleneck, and huge batches would starve other sessions.
pub const MAX_PIPELINE: u32 = 64;

/// The smallest pipelining depth a cluster gets. Alg. 2's BDP/avgFileSize rounds to 1 on
/// short paths, where nothing hides the server's per-file turnaround (open, first read,
/// reply); a few commands queued behind the one in flight do. Measured on loopback with 200
/// files of 0.1–0.75 MB plus two of 150–200 MB: depth 1 moved 4.4–5.1 Gb/s, depth 4
/// 5.3–7.1 Gb/s (`haul cp -r -p 1 --pipeline N`, two runs each). The floor only applies to
/// clusters of files averaging under [`PIPELINE_FLOOR_BELOW`]: a batch is also the unit of work
/// a session takes, and four big files on one channel would leave a long tail.
pub const MIN_PIPELINE: u32 = 4;

/// Mean file size below which [`MIN_PIPELINE`] applies (16 MiB).
pub const PIPELINE_FLOOR_BELOW: f64 = 16.0 * 1024.0 * 1024.0;

/// The largest per-cluster parallelism (the engine's own stream cap).
pub const MAX_PARALLELISM: u32 = 64;

/// How a dataset is split into clusters and scheduled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clustering {
    /// The path estimate the cut-offs and heuristics are multiples of.
    pub path: PathEstimate,
    /// Cut-offs as multiples of the BDP.
    pub cutoffs: Cutoffs,
    /// Channel allocation.
    pub policy: Policy,
}

/// One cluster as the engine runs it, for summaries and the history store.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ClusterInfo {
    /// Size class.
    pub class: FileClass,
    /// Files in the cluster when it was formed.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Commands in flight per control session.
    pub pipelining: u32,
    /// Streams per file.
    pub parallelism: u32,
}

/// A batch of work for one control session.
#[derive(Debug)]
pub(crate) struct Batch {
    pub jobs: Vec<(Job, u32)>,
    pub pipeline: usize,
    pub parallelism: u32,
    /// Set when taking this batch cut its job in two at the end of the transfer (see
    /// [`Queues::take`]): the file's destination and how many pieces it gained (1 when a piece
    /// was cut, 2 when a whole file became two pieces).
    pub split: Option<(String, usize)>,
}

/// The smallest piece the end-of-transfer cut makes, for pieces of `piece` bytes: an eighth of a
/// piece, within [1 MiB, 8 MiB]. 8 MiB is 67 ms of a 1 Gb/s link and 0.45 s of one stream at
/// 150 Mb/s, against one round trip (the `ERET`) per piece.
pub fn tail_min(piece: u64) -> u64 {
    (piece / 8).clamp(1 << 20, 8 << 20)
}

#[derive(Debug)]
struct Lane {
    class: Option<FileClass>,
    jobs: VecDeque<(Job, u32)>,
    pipeline: u32,
    parallelism: u32,
}

impl Lane {
    fn remaining(&self) -> u64 {
        self.jobs
            .iter()
            .map(|(j, _)| j.size)
            .fold(0, u64::saturating_add)
    }
}

/// The work still to hand out.
#[derive(Debug)]
pub(crate) struct Queues {
    lanes: Vec<Lane>,
    clustering: Option<Clustering>,
    alloc: Option<Allocation>,
    channels: u32,
    /// Slot index → lane index, rebuilt whenever the allocation changes.
    slot_lane: Vec<usize>,
    info: Vec<ClusterInfo>,
    /// Piece size for splitting big files across channels (None: files move whole).
    piece: Option<u64>,
}

/// `jobs` with every file of at least two pieces cut into its pieces, in order.
fn cut(jobs: impl IntoIterator<Item = Job>, piece: Option<u64>) -> impl Iterator<Item = Job> {
    jobs.into_iter().flat_map(move |j| match piece {
        Some(n) => plan::split(j, n),
        None => vec![j],
    })
}

impl Queues {
    /// One queue: every batch gets `pipeline` files. With `piece`, files of at least two
    /// pieces are cut into pieces of that many bytes (see [`plan::split`]).
    pub fn single(jobs: Vec<Job>, pipeline: usize, piece: Option<u64>) -> Queues {
        let lane = Lane {
            class: None,
            jobs: cut(jobs, piece).map(|j| (j, 0)).collect(),
            pipeline: pipeline.clamp(1, u32::MAX as usize) as u32,
            parallelism: 0,
        };
        Queues {
            lanes: vec![lane],
            clustering: None,
            alloc: None,
            channels: 0,
            slot_lane: Vec::new(),
            info: Vec::new(),
            piece,
        }
    }

    /// Clusters `jobs` by `c`, or one queue with `pipeline` if the estimate is unusable.
    /// Files are clustered by their whole size, then cut into pieces as in [`Queues::single`].
    pub fn clustered(
        jobs: Vec<Job>,
        c: Clustering,
        channels: u32,
        pipeline: usize,
        piece: Option<u64>,
    ) -> Queues {
        let mut q = Queues::single(Vec::new(), pipeline, piece);
        q.clustering = Some(c);
        q.channels = channels.max(1);
        q.partition(jobs);
        q
    }

    /// The clusters as formed (empty without clustering).
    pub fn clusters(&self) -> &[ClusterInfo] {
        &self.info
    }

    /// The current channel shares per cluster, in MC order.
    pub fn shares(&self) -> Vec<(FileClass, u32)> {
        self.alloc
            .as_ref()
            .map(Allocation::shares)
            .unwrap_or_default()
    }

    fn partition(&mut self, jobs: Vec<Job>) {
        let Some(c) = self.clustering else { return };
        // Pieces still waiting when the bandwidth re-clusters go back together by file, so a
        // file is classed and counted once, by its whole size.
        let mut files: Vec<Vec<Job>> = Vec::new();
        let mut split: std::collections::HashMap<String, usize> = Default::default();
        for j in jobs {
            match j.piece.and_then(|_| split.get(&j.dst).copied()) {
                Some(g) => files[g].push(j),
                None => {
                    if j.piece.is_some() {
                        split.insert(j.dst.clone(), files.len());
                    }
                    files.push(vec![j]);
                }
            }
        }
        let whole = |f: &[Job]| f[0].piece.map_or(f[0].size, |p| p.whole);
        let sizes: Vec<u64> = files.iter().map(|f| whole(f)).collect();
        let clusters = match cluster::partition(&sizes, c.path.bdp(), c.path.buffer, &c.cutoffs) {
            Ok(k) => k,
            Err(e) => {
                tracing::warn!("clustering off: {e}");
                self.clustering = None;
                let p = self.lanes.first().map_or(1, |l| l.pipeline);
                let jobs = cut(files.into_iter().flatten(), self.piece)
                    .map(|j| (j, 0))
                    .collect();
                self.lanes = vec![Lane {
                    class: None,
                    jobs,
                    pipeline: p,
                    parallelism: 0,
                }];
                return;
            }
        };
        let mut slots: Vec<Option<Vec<Job>>> = files.into_iter().map(Some).collect();
        // Lanes in MC order so that stealing and shares agree.
        let mut lanes = Vec::new();
        let mut info = Vec::new();
        for class in cluster::MC_ORDER {
            let Some(k) = clusters.iter().find(|k| k.class == class) else {
                continue;
            };
            let floor = if k.avg_size() < PIPELINE_FLOOR_BELOW {
                MIN_PIPELINE
            } else {
                1
            };
            let pipeline = k.params.pipelining.clamp(floor, MAX_PIPELINE);
            let parallelism = k.params.parallelism.clamp(1, MAX_PARALLELISM);
            info.push(ClusterInfo {
                class,
                files: k.files.len(),
                bytes: k.bytes,
                pipelining: pipeline,
                parallelism,
            });
            let mut mine: Vec<Vec<Job>> = k.files.iter().filter_map(|&i| slots[i].take()).collect();
            // Largest first (LPT): the last file to start is a lane's smallest, so the
            // transfer does not end on one big file crawling alone on one channel.
            mine.sort_by_key(|f| std::cmp::Reverse(whole(f)));
            let jobs = cut(mine.into_iter().flatten(), self.piece)
                .map(|j| (j, 0))
                .collect();
            lanes.push(Lane {
                class: Some(class),
                jobs,
                pipeline,
                parallelism,
            });
        }
        tracing::info!(
            bdp = c.path.bdp(),
            rtt_s = c.path.rtt_s,
            "clusters: {info:?}"
        );
        self.alloc = Some(Allocation::new(&clusters, self.channels, c.policy));
        self.lanes = lanes;
        self.info = info;
        self.rebuild();
    }

    /// True when no file waits.
    pub fn is_empty(&self) -> bool {
        self.lanes.iter().all(|l| l.jobs.is_empty())
    }

    /// Files waiting.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lanes.iter().map(|l| l.jobs.len()).sum()
    }

    fn rebuild(&mut self) {
        self.slot_lane.clear();
        for (class, n) in self.shares() {
            if let Some(i) = self.lanes.iter().position(|l| l.class == Some(class)) {
                self.slot_lane.extend(std::iter::repeat_n(i, n as usize));
            }
        }
    }

    /// The next batch for channel `slot` of `channels`, or None when nothing waits.
    pub fn take(&mut self, slot: usize, channels: u32) -> Option<Batch> {
        if let Some(alloc) = self.alloc.as_mut() {
            let mut changed = false;
            for l in &self.lanes {
                if let Some(class) = l.class.filter(|_| l.jobs.is_empty()) {
                    if alloc.channels(class) > 0 || alloc.shares().iter().any(|s| s.0 == class) {
                        alloc.finish(class);
                        changed = true;
                    }
                }
            }
            let channels = channels.max(1);
            if channels != self.channels || changed {
                for l in &self.lanes {
                    if let Some(class) = l.class {
                        alloc.set_remaining(class, l.remaining());
                    }
                }
                alloc.resize(channels);
                self.channels = channels;
                self.rebuild();
            }
        }
        let own = self
            .slot_lane
            .get(slot)
            .copied()
            .filter(|&i| !self.lanes[i].jobs.is_empty());
        let i = own.or_else(|| self.lanes.iter().position(|l| !l.jobs.is_empty()))?;
        let split = self.cut_front(i, channels);
        let lane = &mut self.lanes[i];
        // A piece travels alone: pieces exist so that idle channels can share a big file, and a
        // batch is what one channel takes. Whole files stop a batch before the next piece.
        let n = match lane.jobs.front() {
            Some((j, _)) if j.piece.is_some() => 1,
            _ => lane
                .jobs
                .iter()
                .take(lane.pipeline as usize)
                .take_while(|(j, _)| j.piece.is_none())
                .count(),
        };
        Some(Batch {
            jobs: lane.jobs.drain(..n).collect(),
            pipeline: lane.pipeline as usize,
            parallelism: lane.parallelism,
            split,
        })
    }

    /// The end-of-transfer cut (factoring: Hummel, Schonberg and Flynn, CACM 35(8), 1992): with
    /// pieces on, the front job of lane `i` (a piece, or a whole file of at least two
    /// [`tail_min`]s) is cut to half of an even share of the bytes still waiting,
    /// ⌈waiting / (2·channels)⌉ rounded up to a MiB and at least [`tail_min`], when the rest
    /// is at least [`tail_min`] and half that share; the rest goes back to the front of the
    /// lane as a piece. Early on the share is larger than any piece and only a file's last
    /// planned piece is cut, in halves, when it is longer than one piece. At the
    /// end every channel gets a share of the last bytes instead of one channel moving the last
    /// piece alone: on the mixed benchmark the last piece (up to two pieces long, 130 MB)
    /// crawled on one stream at 60–250 Mb/s for 3–19 s after the other channels had run dry.
    fn cut_front(&mut self, i: usize, channels: u32) -> Option<(String, usize)> {
        let piece = self.piece?;
        let min = tail_min(piece);
        let front = &self.lanes[i].jobs.front()?.0;
        let size = front.size;
        if size < 2 * min {
            return None;
        }
        let mib = 1u64 << 20;
        let up = |n: u64| n.div_ceil(mib).saturating_mul(mib);
        // A file's last planned piece takes the remainder (one to two pieces); it goes out in
        // halves, so no piece started mid-transfer is longer than one piece: a 130 MB one
        // crawled alone at 70 Mb/s for 15 s after every other channel had finished.
        let cap = if front.piece.is_some() && size > piece {
            up(size.div_ceil(2))
        } else {
            size
        };
        let waiting = self
            .lanes
            .iter()
            .map(Lane::remaining)
            .fold(0, u64::saturating_add);
        let chunk = up(waiting.div_ceil(2 * u64::from(channels.max(1))))
            .min(cap)
            .max(min);
        // The rest must be worth its own round trip: at least the floor and half a share.
        if chunk >= size || size - chunk < min.max(chunk / 2) {
            return None;
        }
        let (job, tries) = self.lanes[i].jobs.pop_front()?;
        let (offset, whole, added) = match job.piece {
            Some(p) => (p.offset, p.whole, 1),
            None => (0, job.size, 2),
        };
        let head = Job {
            size: chunk,
            piece: Some(Piece { offset, whole }),
            ..job.clone()
        };
        let rest = Job {
            size: job.size - chunk,
            piece: Some(Piece {
                offset: offset + chunk,
                whole,
            }),
            ..job
        };
        let dst = head.dst.clone();
        let lane = &mut self.lanes[i].jobs;
        lane.push_front((rest, tries));
        lane.push_front((head, tries));
        Some((dst, added))
    }

    /// Puts a file back (after a checksum mismatch) at the end of its own cluster's lane.
    pub fn push_back(&mut self, job: Job, tries: u32) {
        self.lane_of(&job).push_back((job, tries));
    }

    /// Returns a file a session took but did not move (it left its batch early) to the front of
    /// its own cluster's lane, where it was.
    pub fn push_front(&mut self, job: Job, tries: u32) {
        self.lane_of(&job).push_front((job, tries));
    }

    fn lane_of(&mut self, job: &Job) -> &mut VecDeque<(Job, u32)> {
        let whole = job.piece.map_or(job.size, |p| p.whole);
        let class = self
            .clustering
            .map(|c| c.cutoffs.classify(whole, c.path.bdp()));
        let i = match self.lanes.iter().position(|l| l.class == class) {
            Some(i) => i,
            None if !self.lanes.is_empty() => 0,
            None => {
                self.lanes.push(Lane {
                    class,
                    jobs: VecDeque::new(),
                    pipeline: 1,
                    parallelism: 0,
                });
                0
            }
        };
        &mut self.lanes[i].jobs
    }

    /// A live bandwidth estimate, the highest throughput seen: a lower bound on the bottleneck,
    /// so it can only raise the estimate (a slow dataset of tiny files says nothing about the
    /// link). If the user gave no bandwidth and the BDP grows by more than 2×, the files still
    /// waiting are clustered again. Returns true if they were.
    pub fn set_bandwidth(&mut self, bps: f64) -> bool {
        let Some(mut c) = self.clustering else {
            return false;
        };
        if c.path.bandwidth_given || !(bps.is_finite() && bps > c.path.bandwidth_bps) {
            return false;
        }
        let old = c.path.bdp();
        c.path.bandwidth_bps = bps;
        let ratio = c.path.bdp() / old;
        if ratio <= 2.0 {
            return false;
        }
        self.clustering = Some(c);
        let jobs: Vec<Job> = self
            .lanes
            .iter_mut()
            .flat_map(|l| l.jobs.drain(..))
            .map(|(j, _)| j)
            .collect();
        self.partition(jobs);
        true
    }
}

#[cfg(test)]
mod tests;
