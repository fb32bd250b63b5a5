//! Shared by the client-side targets: every reply a `ReplyParser` yields from one input.

use haul_proto::{Reply, ReplyParser};

/// Every reply the parser yields, continuing past errors like the reply_parser target.
pub fn replies(data: &[u8]) -> Vec<Reply> {
    let mut p = ReplyParser::new();
    p.extend(data);
    let mut out = Vec::new();
    loop {
        match p.next_reply() {
            Ok(Some(r)) => out.push(r),
            Ok(None) => break,
            Err(_) => {}
        }
    }
    out
}
