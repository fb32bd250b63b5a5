//! What happened to each datagram, and the counters both ends keep: every dropped datagram is
//! counted under the reason it was dropped.

use crate::wire::WireError;

/// Why a datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// The parser rejected it.
    Malformed(WireError),
    /// Its session id is not this session's (stray, or replayed from another session).
    ForeignSession,
    /// Its sequence number, offset or length is impossible for this file, or an ACK claims
    /// datagrams that were never sent.
    Forged,
    /// Beyond the receiver's reorder window.
    OutOfWindow,
    /// The wrong type for this end (an ACK at the receiver, DATA at the sender).
    Unexpected,
    /// An ACK not newer than one already used (reordered or replayed).
    Stale,
}

/// What a state machine did with one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Used.
    Accepted,
    /// Valid, but its data was already received (a retransmission or a replay).
    Duplicate,
    /// Dropped and counted.
    Dropped(DropReason),
}

/// Counters kept by the sender.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// DATA datagrams sent, retransmissions included.
    pub datagrams_sent: u64,
    /// Retransmitted datagrams.
    pub retransmits: u64,
    /// Payload bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// ACKs used.
    pub acks: u64,
    /// Sender timeouts (no ACK for an RTO) that sent a probe.
    pub timeouts: u64,
    /// Times the send buffer grew from the heap because every datagram was outstanding.
    pub heap_grows: u64,
    /// Rate-control steps taken.
    pub control_steps: u64,
    /// Datagrams the parser rejected.
    pub malformed: u64,
    /// Datagrams of another session.
    pub foreign: u64,
    /// ACKs that acknowledged data never sent.
    pub forged: u64,
    /// DATA datagrams received by the sender.
    pub unexpected: u64,
    /// Reordered or replayed ACKs.
    pub stale: u64,
}

/// Counters kept by the receiver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// New DATA datagrams accepted.
    pub accepted: u64,
    /// Payload bytes written to the sink.
    pub delivered: u64,
    /// Valid DATA datagrams already received (retransmissions, duplicates, replays).
    pub duplicates: u64,
    /// ACKs sent, of every kind.
    pub acks: u64,
    /// TNT and TMO ACKs sent.
    pub timeout_acks: u64,
    /// Datagrams the parser rejected.
    pub malformed: u64,
    /// Datagrams of another session.
    pub foreign: u64,
    /// DATA with an impossible sequence number, offset or length.
    pub forged: u64,
    /// DATA beyond the reorder window.
    pub out_of_window: u64,
    /// ACKs received by the receiver.
    pub unexpected: u64,
}
