//! The server's side of a GridFTP control session as sans-IO state machines, in the manner of
//! quinn-proto: no sockets, threads or clocks inside. The driver feeds in the commands it read
//! (parsed by [`crate::Command::parse`]) and takes out the actions to perform: replies to
//! write, the TLS handshake, a credential check, data-channel set-ups and transfers to run,
//! commands for the driver's own dispatch, and the end of the session.
//!
//! - [`Login`]: the greeting, `AUTH TLS` / `PBSZ` / `PROT`, `USER` / `PASS` with the
//!   failed-login limit, `QUIT`, and the refusal of every other command before the login.
//! - [`Transfers`]: the settings of the next transfer, `PORT` / `PASV` and their kin (with
//!   [`Peers`], who data connections may reach), and the reply sequence of each transfer,
//!   `ABOR` included.
//! - [`Session`]: both, with the commands pipelined during a transfer held until it ends.

mod login;
mod peers;
mod session;
mod transfers;

pub use crate::command::Dcau;
pub use login::{
    AdatReply, Login, LoginConfig, ServerAction, Verdict, GREETING, MAX_LOGIN_FAILURES,
};
pub use peers::Peers;
pub use session::{is_data_command, Session};
pub use transfers::{
    DataConfig, ListKind, Outcome, Passive, Transfer, TransferOp, Transfers, WriteKind, MAX_SBUF,
    MIN_SBUF,
};

#[cfg(test)]
mod session_props;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod transfer_tests;
