//! Sans-IO GridFTP protocol core: control-channel command and reply codecs (RFC 959, 2389,
//! 3659, 4217, GFD.020), the FEAT reader, the client's session machines (login, pipelined reply
//! matching), the server's login machine, the MODE E block codec, restart / performance markers
//! and host-port formats.
//! Nothing here touches a socket; the IO layers feed bytes in and write bytes out.

pub mod btc;
pub mod client;
pub mod command;
pub mod features;
pub mod hostport;
pub mod line;
pub mod markers;
pub mod mode_e;
pub mod nested;
pub mod reply;
pub mod server;

pub use client::{Action, Event, Login, LoginError, Pipeline, PipelineError};
pub use command::{Command, CommandError};
pub use features::Features;
pub use line::{LineBuffer, LineError};
pub use markers::{PerfMarker, RangeSet};
pub use mode_e::{BlockDecoder, BlockEvent, Descriptor, Header, ModeEError, HEADER_LEN};
pub use reply::{Reply, ReplyError, ReplyParser};

/// Longest control-channel line haul accepts, in bytes, including CRLF.
pub const MAX_LINE: usize = 8192;
