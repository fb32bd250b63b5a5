//! The server's side of a GridFTP control session as sans-IO state machines, in the manner of
//! quinn-proto: no sockets, threads or clocks inside. The driver feeds in the commands it read
//! (parsed by [`crate::Command::parse`]) and takes out the actions to perform: replies to
//! write, the TLS handshake, a credential check, commands for the driver's own dispatch, and the
//! end of the session.
//!
//! - [`Login`]: the greeting, `AUTH TLS` / `PBSZ` / `PROT`, `USER` / `PASS` with the
//!   failed-login limit, `QUIT`, and the refusal of every other command before the login.

mod login;

pub use login::{Login, LoginConfig, ServerAction, Verdict, GREETING, MAX_LOGIN_FAILURES};

#[cfg(test)]
mod tests;
