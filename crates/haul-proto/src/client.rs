//! The client's side of a GridFTP control session as sans-IO state machines, in the manner of
//! quinn-proto: no sockets, threads or clocks inside. The driver feeds in the replies it read
//! (parsed by [`crate::ReplyParser`]) and takes out the commands to write and the actions to
//! perform, so every path is testable in memory.
//!
//! - [`Login`]: greeting, optional TLS (`AUTH TLS`, `PBSZ 0`, `PROT P`), `USER` / `PASS`,
//!   `FEAT` and `TYPE I`.
//! - [`Pipeline`]: matches replies to pipelined commands, oldest first, telling markers and
//!   preliminary replies from the final one that completes a command.
//! - [`Transfers`]: sequences pipelined file transfers (`REST`, `RETR` / `ERET` / `STOR`,
//!   `CKSM`, and `ABOR`) within a window of files, telling the driver when to move data and how
//!   each file ended.

mod login;
mod pipeline;
mod transfer;

pub use login::{Action, Login, LoginError};
pub use pipeline::{Event, Pipeline, PipelineError};
pub use transfer::{Direction, FileEvent, FileOp, TransferError, Transfers};

#[cfg(test)]
mod tests;
