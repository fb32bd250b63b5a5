//! The TPG control channel (001 §III-A, 13 steps): message codec and sans-IO state machines.
//!
//! Wire format, version [`VERSION`]: every message is one frame
//! `type: u8 | length: u32 big-endian | payload: length bytes`, payload at most
//! [`MAX_PAYLOAD`]. State messages (TPG's one-byte messages) have an empty payload; the
//! handshake, parameters, stream ports and results carry JSON; ERROR carries UTF-8 text.
//! The full description is in `docs/profile.md`.

mod machine;

pub use machine::{Client, ClientEvent, ClientState, Server, ServerEvent, ServerState};

use serde::{Deserialize, Serialize};

use crate::params::ProfileParams;

/// Control protocol version, sent in HANDSHAKE.
pub const VERSION: u16 = 1;
/// Largest payload accepted.
pub const MAX_PAYLOAD: usize = 1 << 20;
/// Frame header: type byte plus 32-bit length.
const HEADER: usize = 5;

/// Message type codes on the wire.
pub mod code {
    /// Server → client: the control channel is established (step 3).
    pub const CTRL_CHAN_EST: u8 = 1;
    /// Both ways: version handshake (steps 4–5).
    pub const HANDSHAKE: u8 = 2;
    /// Both ways: parameter exchange (step 6).
    pub const PARAMS: u8 = 3;
    /// Client request / server reply with data ports (steps 7–8).
    pub const CREATE_STREAMS: u8 = 4;
    /// Start of the transfer and its acknowledgement (step 10).
    pub const PROFILING_START: u8 = 5;
    /// End of the transfer and its acknowledgement (step 12).
    pub const PROFILING_END: u8 = 6;
    /// Results, both ways (step 13).
    pub const EXCHANGE_PROFILE: u8 = 7;
    /// Final message and its acknowledgement (step 13).
    pub const TPG_DONE: u8 = 8;
    /// Either side: failure, with a text reason.
    pub const ERROR: u8 = 255;
}

/// HANDSHAKE payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Control protocol version.
    pub version: u16,
    /// Software name and version, for logs.
    pub software: String,
}

impl Hello {
    /// This build's hello.
    pub fn ours() -> Hello {
        Hello {
            version: VERSION,
            software: format!("haul-profile {}", env!("CARGO_PKG_VERSION")),
        }
    }
}

/// One stream's side of the results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamSide {
    /// Bytes sent (client) or received (server).
    pub bytes: u64,
    /// Seconds this stream was active, ΔT of Eq. 3.1 of 000.
    pub seconds: f64,
    /// Smoothed RTT in milliseconds (TCP_INFO or UDT perfmon).
    pub rtt_ms: Option<f64>,
    /// Retransmitted segments / packets.
    pub retransmits: Option<u64>,
    /// Datagrams sent or received (UDP).
    pub packets: Option<u64>,
    /// Datagrams lost (UDP, receiver side).
    pub lost: Option<u64>,
}

/// EXCHANGE_PROFILE payload: one side's measurements.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SideReport {
    /// Per-stream results, in stream order.
    pub streams: Vec<StreamSide>,
    /// Wall-clock seconds from PROFILING_START to the end on this side.
    pub duration_s: f64,
}

/// One control message.
#[derive(Debug, Clone, PartialEq)]
pub enum Msg {
    /// CTRL_CHAN_EST.
    CtrlChanEst,
    /// HANDSHAKE.
    Handshake(Hello),
    /// PARAMS: the client's θ, or the server's accepted θ.
    Params(Box<ProfileParams>),
    /// CREATE_STREAMS: empty from the client, the data ports (one per stream) from the server.
    CreateStreams(Vec<u16>),
    /// PROFILING_START.
    Start,
    /// PROFILING_END.
    End,
    /// EXCHANGE_PROFILE.
    Exchange(SideReport),
    /// TPG_DONE.
    Done,
    /// ERROR with a reason.
    Error(String),
}

/// A malformed frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

#[derive(Serialize, Deserialize)]
struct Ports {
    ports: Vec<u16>,
}

impl Msg {
    /// The wire type code.
    pub fn code(&self) -> u8 {
        match self {
            Msg::CtrlChanEst => code::CTRL_CHAN_EST,
            Msg::Handshake(_) => code::HANDSHAKE,
            Msg::Params(_) => code::PARAMS,
            Msg::CreateStreams(_) => code::CREATE_STREAMS,
            Msg::Start => code::PROFILING_START,
            Msg::End => code::PROFILING_END,
            Msg::Exchange(_) => code::EXCHANGE_PROFILE,
            Msg::Done => code::TPG_DONE,
            Msg::Error(_) => code::ERROR,
        }
    }

    /// TPG's name for the message.
    pub fn name(&self) -> &'static str {
        match self {
            Msg::CtrlChanEst => "CTRL_CHAN_EST",
            Msg::Handshake(_) => "HANDSHAKE",
            Msg::Params(_) => "PARAMS",
            Msg::CreateStreams(_) => "CREATE_STREAMS",
            Msg::Start => "PROFILING_START",
            Msg::End => "PROFILING_END",
            Msg::Exchange(_) => "EXCHANGE_PROFILE",
            Msg::Done => "TPG_DONE",
            Msg::Error(_) => "ERROR",
        }
    }

    /// Appends the frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let payload: Vec<u8> = match self {
            Msg::CtrlChanEst | Msg::Start | Msg::End | Msg::Done => Vec::new(),
            Msg::Handshake(h) => serde_json::to_vec(h).unwrap_or_default(),
            Msg::Params(p) => serde_json::to_vec(p).unwrap_or_default(),
            Msg::CreateStreams(ports) if ports.is_empty() => Vec::new(),
            Msg::CreateStreams(ports) => serde_json::to_vec(&Ports {
                ports: ports.clone(),
            })
            .unwrap_or_default(),
            Msg::Exchange(r) => serde_json::to_vec(r).unwrap_or_default(),
            Msg::Error(s) => {
                let mut end = s.len().min(MAX_PAYLOAD);
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                s.as_bytes()[..end].to_vec()
            }
        };
        out.push(self.code());
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(&payload);
    }

    /// The frame as a new vector.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode(&mut v);
        v
    }

    fn decode(ty: u8, payload: &[u8]) -> Result<Msg, DecodeError> {
        fn json<T: for<'de> Deserialize<'de>>(what: &str, p: &[u8]) -> Result<T, DecodeError> {
            serde_json::from_slice(p).map_err(|e| DecodeError(format!("bad {what} payload: {e}")))
        }
        let empty = |m: Msg| {
            if payload.is_empty() {
                Ok(m)
            } else {
                Err(DecodeError(format!(
                    "{} carries {} unexpected payload bytes",
                    m.name(),
                    payload.len()
                )))
            }
        };
        match ty {
            code::CTRL_CHAN_EST => empty(Msg::CtrlChanEst),
            code::HANDSHAKE => Ok(Msg::Handshake(json("HANDSHAKE", payload)?)),
            code::PARAMS => Ok(Msg::Params(Box::new(json("PARAMS", payload)?))),
            code::CREATE_STREAMS if payload.is_empty() => Ok(Msg::CreateStreams(Vec::new())),
            code::CREATE_STREAMS => Ok(Msg::CreateStreams(
                json::<Ports>("CREATE_STREAMS", payload)?.ports,
            )),
            code::PROFILING_START => empty(Msg::Start),
            code::PROFILING_END => empty(Msg::End),
            code::EXCHANGE_PROFILE => Ok(Msg::Exchange(json("EXCHANGE_PROFILE", payload)?)),
            code::TPG_DONE => empty(Msg::Done),
            code::ERROR => Ok(Msg::Error(String::from_utf8_lossy(payload).into_owned())),
            t => Err(DecodeError(format!("unknown message type {t}"))),
        }
    }
}

/// Incremental frame decoder: feed bytes as they arrive, take whole messages out.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
}

impl Decoder {
    /// An empty decoder.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Appends received bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole message, `Ok(None)` if more bytes are needed.
    pub fn next_msg(&mut self) -> Result<Option<Msg>, DecodeError> {
        if self.buf.len() < HEADER {
            return Ok(None);
        }
        let ty = self.buf[0];
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len > MAX_PAYLOAD {
            return Err(DecodeError(format!(
                "frame of {len} bytes exceeds the {MAX_PAYLOAD}-byte limit"
            )));
        }
        if self.buf.len() < HEADER + len {
            return Ok(None);
        }
        let msg = Msg::decode(ty, &self.buf[HEADER..HEADER + len]);
        self.buf.drain(..HEADER + len);
        msg.map(Some)
    }
}

#[cfg(test)]
mod tests;
