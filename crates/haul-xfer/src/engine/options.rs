//! What a caller gives the engine (the route, the [`Options`]) and what it gets back (throughput
//! [`Sample`]s and the [`Summary`]).

use std::time::Duration;

use crate::checksum::Algorithm;
use crate::schedule::{ClusterInfo, Clustering};
use crate::session::PasvAddress;
use crate::tls::ClientTls;
use crate::url::RemoteUrl;

/// Which data channel carries file data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Transport {
    /// MODE E over parallel TCP streams.
    #[default]
    Tcp,
    /// PLUT (reliable UDP), negotiated with `OPTS HAUL`; one file at a time per session.
    Plut,
    /// MODE E over UDT4 connections instead of TCP ones, asked for with `SITE SETNETSTACK udt`
    /// (haul servers, and Globus servers with the UDT driver); otherwise as [`Transport::Tcp`].
    Udt,
}

impl Transport {
    /// The network stack under MODE E, for the transports that use MODE E.
    pub fn net_stack(self) -> Option<haul_transport::net::NetStack> {
        use haul_transport::net::NetStack;
        match self {
            Transport::Tcp => Some(NetStack::Tcp),
            Transport::Udt => Some(NetStack::Udt),
            Transport::Plut => None,
        }
    }
}

/// How to move the data.
#[derive(Debug, Clone)]
pub struct Options {
    /// TCP streams per file.
    pub parallelism: u32,
    /// Files in flight (control sessions).
    pub concurrency: u32,
    /// Commands in flight per control session.
    pub pipeline: usize,
    /// Socket buffer size (None: autotuning).
    pub tcp_buffer: Option<usize>,
    /// MODE E block size.
    pub block: usize,
    /// Checksum algorithm; None picks XXHC with haul peers, else MD5.
    pub checksum: Option<Algorithm>,
    /// Verify every file end to end.
    pub verify: bool,
    /// Continue from restart journals.
    pub resume: bool,
    /// Throughput sample interval.
    pub sample_interval: Duration,
    /// TLS roots for `haul://` URLs.
    pub tls: Option<ClientTls>,
    /// Where data connections go after `PASV`.
    pub pasv: PasvAddress,
    /// How long a data channel may stay silent before the transfer fails.
    pub data_timeout: Duration,
    /// Byte count for memory-to-memory runs from `/dev/zero`.
    pub len: Option<u64>,
    /// Bandwidth cap in bytes per second for each file's data (None: no cap).
    pub max_rate: Option<u64>,
    /// Write large downloads to local disks around the page cache (`O_DIRECT`) when nothing
    /// reads them back as they arrive (`haul_transport::io::DirectFile`).
    pub direct_io: bool,
    /// The data channel.
    pub transport: Transport,
    /// PLUT only: the sender's NIC rate in bytes/s, its pacing ceiling (None: 10 Gb/s).
    pub plut_rate: Option<u64>,
    /// PLUT only: the rate in bytes/s the sender starts from (None: B/16 and a probe up).
    pub plut_start: Option<u64>,
    /// File-size clusters with per-cluster pipelining and parallelism (None: one queue with
    /// `pipeline` and `parallelism` for every file).
    pub clustering: Option<Clustering>,
    /// Cut files of at least two pieces into pieces of this many bytes, each fetched with
    /// `ERET` by whichever channel is free, so a big file does not end the transfer crawling
    /// on one channel (None: files move whole). Downloads over TCP without `resume` only;
    /// other transfers ignore it.
    pub piece: Option<u64>,
    /// Through relays: the next leg's settings to ask the first relay for (`OPTS RELAY`).
    pub relay_leg: Option<haul_proto::nested::NextLeg>,
    /// Sessions the planner left logged in, which workers to the same server take before
    /// connecting (share it with [`crate::plan::PlanOptions::spare`]).
    pub spare: std::sync::Arc<crate::session::Spare>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            parallelism: 4,
            concurrency: 2,
            pipeline: 8,
            tcp_buffer: None,
            block: haul_transport::DEFAULT_BLOCK,
            checksum: None,
            verify: true,
            resume: false,
            sample_interval: Duration::from_secs(1),
            tls: None,
            pasv: PasvAddress::ControlPeer,
            data_timeout: crate::session::DEFAULT_DATA_TIMEOUT,
            len: None,
            max_rate: None,
            direct_io: true,
            transport: Transport::Tcp,
            plut_rate: None,
            plut_start: None,
            clustering: None,
            piece: None,
            relay_leg: None,
            spare: Default::default(),
        }
    }
}

/// Which way the bytes go.
#[derive(Debug, Clone)]
pub enum Route {
    /// Server to local disk.
    Download(RemoteUrl),
    /// Local disk to server.
    Upload(RemoteUrl),
    /// Server to server; this client only drives the two control channels.
    ThirdParty(RemoteUrl, RemoteUrl),
}

/// Throughput over one interval of a transfer, as the engine measures it (the history stores
/// the same three numbers).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Sample {
    /// End of the interval, seconds since the transfer started.
    pub t_s: f64,
    /// Bytes moved in the interval.
    pub bytes: u64,
    /// Throughput over the interval, bits per second.
    pub bps: f64,
}

/// What a finished transfer reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    /// Files moved.
    pub files: u64,
    /// Payload bytes moved (including re-transfers).
    pub bytes: u64,
    /// Wall-clock seconds.
    pub duration_s: f64,
    /// Files whose checksums matched end to end.
    pub verified: u64,
    /// Files re-sent after a checksum mismatch.
    pub retransferred: u64,
    /// Bytes of XXHC chunks re-sent after a checksum mismatch, in place of whole files.
    pub chunks_resent_bytes: u64,
    /// Checksum algorithm used, if any.
    pub checksum: Option<String>,
    /// Throughput samples.
    pub samples: Vec<Sample>,
    /// The file-size clusters, when clustering was on.
    pub clusters: Vec<ClusterInfo>,
    /// Pieces of split files that landed (0: every file moved whole).
    pub pieces: u64,
}

impl Summary {
    /// The mean throughput in bits per second (0 for an instant transfer).
    pub fn mean_bps(&self) -> f64 {
        if self.duration_s > 0.0 {
            self.bytes as f64 * 8.0 / self.duration_s
        } else {
            0.0
        }
    }
}
