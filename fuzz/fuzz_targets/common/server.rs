//! Shared by the server-side targets: the commands of one input as the server reads them, and
//! the harness's user table.

use haul_proto::server::Verdict;
use haul_proto::{Command, LineBuffer, LineError, Reply};

/// Every command in `data`, as the server reads them: an over-long line ends the session, a
/// line that is not UTF-8 or does not parse is answered outside the machine.
pub fn commands(data: &[u8]) -> Vec<Command> {
    let mut b = LineBuffer::new(haul_proto::MAX_LINE);
    b.extend(data);
    let mut out = Vec::new();
    loop {
        match b.next_line() {
            Ok(Some(l)) => out.extend(Command::parse(&l).ok()),
            Ok(None) | Err(LineError::TooLong { .. }) => return out,
            Err(_) => {}
        }
    }
}

/// The verdict of the harness's user table (`alice` / `pw`; `full` is refused, a session
/// limit; anonymous names get in with any password) and the reply code it brings.
pub fn verdict(user: &str, pass: &str) -> (Verdict, u16) {
    match user {
        "alice" if pass == "pw" => (Verdict::Accepted, 230),
        "anonymous" | "ftp" => (Verdict::Accepted, 230),
        "full" => (
            Verdict::Refused(Reply::new(421, "Too many sessions for full.")),
            421,
        ),
        _ => (Verdict::Rejected, 530),
    }
}
