//! What the harness knows of each file from the commands written and the events given, and the
//! checks each event must pass.

use haul_proto::client::{FileEvent, FileOp};
use haul_proto::{Command, Reply};

use crate::input::commands;

/// How a file ended, apart from an abort.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Failed,
    /// A `TransferError::Unexpected` to one of its commands (not its `ABOR`'s final reply):
    /// the file counts as failed, and no `FileEvent` says so.
    Unexpected,
}

/// One pushed file, as the driver sees it.
#[derive(Debug)]
pub struct File {
    /// Its commands, in the order they must be written.
    pub cmds: Vec<Command>,
    /// Where the transfer command is in `cmds`.
    pub transfer_at: usize,
    /// How many of `cmds` were written.
    pub written: usize,
    /// `abort()` returned `ABOR` for it.
    pub abor_sent: bool,
    pub data: bool,
    pub moved: bool,
    pub checksum: bool,
    pub outcome: Option<Outcome>,
    /// The `ABOR`'s final reply came: `Aborted` (true) or an `Unexpected` (false).
    pub aborted: Option<bool>,
}

impl File {
    pub fn new(op: &FileOp) -> File {
        let (cmds, transfer_at) = commands(op);
        File {
            cmds,
            transfer_at,
            written: 0,
            abor_sent: false,
            data: false,
            moved: false,
            checksum: false,
            outcome: None,
            aborted: None,
        }
    }

    /// It got its final event (or its final `Unexpected`).
    pub fn ended(&self) -> bool {
        self.outcome.is_some() || self.aborted.is_some()
    }

    /// The machine counts it failed: it writes nothing more.
    pub fn failed(&self) -> bool {
        matches!(self.outcome, Some(Outcome::Failed | Outcome::Unexpected))
    }

    /// It has commands left that the machine should still write.
    pub fn writable(&self) -> bool {
        self.written > 0 && !self.failed() && !self.abor_sent && self.written < self.cmds.len()
    }

    pub fn is_transfer(&self, c: &Command) -> bool {
        *c == self.cmds[self.transfer_at]
    }
}

/// Which command of which file a reply answered.
pub struct Answered<'a> {
    pub file: usize,
    pub command: &'a Command,
    pub reply: &'a Reply,
}

/// Checks an event `handle_reply` gave for a reply to `a`, and records it.
pub fn reply_event(files: &mut [File], ev: &FileEvent, a: &Answered) {
    let f = file_of(ev);
    assert!(f < files.len(), "{ev:?}: no such file");
    assert_eq!(
        f, a.file,
        "{ev:?} for a reply to {} of file {}",
        a.command, a.file
    );
    let s = &mut files[f];
    let code = a.reply.code;
    let transfer = s.is_transfer(a.command);
    let live = s.outcome.is_none() && s.aborted.is_none();
    match ev {
        FileEvent::DataStart { reused, .. } => {
            assert!(transfer, "{ev:?} for {}", a.command);
            assert!(
                matches!(code, 125 | 150) && *reused == (code == 125),
                "{ev:?}"
            );
            assert!(!s.data, "a second {ev:?}");
            assert!(
                s.outcome != Some(Outcome::Done) && s.aborted.is_none(),
                "{ev:?}: {s:?}"
            );
            s.data = true;
        }
        FileEvent::RestartMarker { .. } | FileEvent::Perf { .. } => {
            let want = if matches!(ev, FileEvent::Perf { .. }) {
                112
            } else {
                111
            };
            assert!(
                transfer && code == want,
                "{ev:?} from {} to {}",
                a.reply,
                a.command
            );
            assert!(live, "{ev:?} after the file's end: {s:?}");
        }
        FileEvent::Moved { .. } => {
            assert!(
                transfer && (200..300).contains(&code),
                "{ev:?}: {}",
                a.reply
            );
            assert!(live && s.data && !s.abor_sent && !s.moved, "{ev:?}: {s:?}");
            s.moved = true;
        }
        FileEvent::Checksum { digest, .. } => {
            assert!(
                matches!(a.command, Command::Cksm { .. }) && code == 213,
                "{ev:?}"
            );
            let text = a.reply.text();
            assert_eq!(
                Some(digest.as_str()),
                text.split_whitespace().next_back().or(Some(""))
            );
            assert!(
                live && s.moved && !s.abor_sent && !s.checksum,
                "{ev:?}: {s:?}"
            );
            s.checksum = true;
        }
        FileEvent::Failed { command, reply, .. } => {
            assert_eq!((command, reply), (a.command, a.reply), "{ev:?}");
            assert!(!a.reply.is_preliminary(), "{ev:?} from a 1yz");
            assert!(live && !s.abor_sent, "{ev:?} after the file's end: {s:?}");
            s.outcome = Some(Outcome::Failed);
        }
        FileEvent::Aborted { .. } => {
            assert!(*a.command == Command::Abor, "{ev:?} for {}", a.command);
            assert!((200..300).contains(&code), "{ev:?} from {}", a.reply);
            assert!(s.abor_sent && s.aborted.is_none(), "{ev:?}: {s:?}");
            assert!(s.outcome != Some(Outcome::Done), "{ev:?} after Done");
            s.aborted = Some(true);
        }
        FileEvent::Done { .. } => panic!("{ev:?} from handle_reply"),
    }
}

/// Checks a `Done` from `poll_event`; `outstanding` tells whether a command of the file is
/// still unanswered.
pub fn done_event(files: &mut [File], ev: &FileEvent, outstanding: bool) {
    let FileEvent::Done { file: f } = *ev else {
        panic!("{ev:?} from poll_event");
    };
    assert!(f < files.len(), "{ev:?}: no such file");
    let s = &mut files[f];
    assert!(
        !s.ended() && !s.abor_sent,
        "{ev:?} after the file's end: {s:?}"
    );
    assert!(!outstanding, "{ev:?} with commands unanswered");
    assert_eq!(
        s.written,
        s.cmds.len(),
        "{ev:?} before every command was written"
    );
    let cksm = matches!(s.cmds.last(), Some(Command::Cksm { .. }));
    assert!(s.data && s.moved && s.checksum == cksm, "{ev:?}: {s:?}");
    s.outcome = Some(Outcome::Done);
}

/// Records a `TransferError::Unexpected` to `a`, whose command was checked to match.
pub fn unexpected(files: &mut [File], a: &Answered) {
    let s = &mut files[a.file];
    if *a.command == Command::Abor {
        if !a.reply.is_preliminary() {
            assert!(s.aborted.is_none(), "a second end of ABOR: {s:?}");
            s.aborted = Some(false);
        }
        s.outcome.get_or_insert(Outcome::Unexpected);
        return;
    }
    // Replies of a failed file are consumed silently; only an ABOR's can still be unexpected.
    assert!(
        s.outcome.is_none() && s.aborted.is_none(),
        "unexpected {} to {} after the file's end: {s:?}",
        a.reply,
        a.command
    );
    s.outcome = Some(Outcome::Unexpected);
}

fn file_of(ev: &FileEvent) -> usize {
    match *ev {
        FileEvent::DataStart { file, .. }
        | FileEvent::RestartMarker { file, .. }
        | FileEvent::Perf { file, .. }
        | FileEvent::Moved { file }
        | FileEvent::Checksum { file, .. }
        | FileEvent::Done { file }
        | FileEvent::Failed { file, .. }
        | FileEvent::Aborted { file } => file,
    }
}
