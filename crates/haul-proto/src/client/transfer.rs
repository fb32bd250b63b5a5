//! [`Transfers`]: sequencing pipelined file transfers (`REST`, `RETR` / `ERET` / `STOR`,
//! `CKSM`) and telling the driver what each reply means for its files.

use std::collections::VecDeque;

use thiserror::Error;

use super::pipeline::{Event, Pipeline, PipelineError};
use crate::command::Restart;
use crate::markers::{parse_range_marker, PerfMarker, RangeSet};
use crate::{Command, Reply};

/// Which way a file moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the server: `RETR` (or `ERET`).
    Get,
    /// To the server: `STOR`.
    Put,
}

/// One file to move, as the commands that move it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileOp {
    /// Which way the file moves.
    pub direction: Direction,
    /// The remote path.
    pub path: String,
    /// `ERET P offset length` instead of `RETR` (Get only; ignored for Put).
    pub eret: Option<(u64, u64)>,
    /// Ranges the receiver already holds: sent as `REST <ranges>` ([`Restart::Ranges`]) before
    /// `RETR` / `STOR`. A `REST` not answered `350` fails the file, yet the transfer command
    /// pipelined behind it then moves the *whole* file: its [`FileEvent::DataStart`] is still
    /// given so the driver can drain (or [`Transfers::abort`]) that data.
    pub restart: Option<RangeSet>,
    /// Checksum algorithm name to ask for with a pipelined `CKSM <alg> 0 -1 <path>` after the
    /// transfer.
    pub cksm: Option<String>,
    /// The size of an upload, announced with `ALLO <size>` before it (as Globus clients do):
    /// a server may reserve the space, or write a large file around its page cache. Advisory:
    /// a refusal fails the file only when it is `452` (no space). Ignored for Get.
    pub allocate: Option<u64>,
}

impl FileOp {
    /// A whole-file transfer of `path` with no restart and no checksum.
    pub fn new(direction: Direction, path: impl Into<String>) -> FileOp {
        FileOp {
            direction,
            path: path.into(),
            eret: None,
            restart: None,
            cksm: None,
            allocate: None,
        }
    }

    /// The commands that move this file, in the order they are written.
    fn kinds(&self) -> impl Iterator<Item = Kind> {
        let put = self.direction == Direction::Put;
        let allo = self.allocate.filter(|_| put).map(|_| Kind::Allo);
        let rest = self.restart.as_ref().map(|_| Kind::Rest);
        let cksm = self.cksm.as_ref().map(|_| Kind::Cksm);
        allo.into_iter()
            .chain(rest)
            .chain(Some(Kind::Transfer))
            .chain(cksm)
    }

    /// The command of kind `kind` for this file.
    fn command(&self, kind: Kind) -> Command {
        let path = self.path.clone();
        match kind {
            Kind::Allo => Command::Allo(self.allocate.unwrap_or_default()),
            Kind::Rest => Command::Rest(Restart::Ranges(self.restart.clone().unwrap_or_default())),
            Kind::Transfer => match (self.direction, self.eret) {
                (Direction::Get, Some((offset, length))) => Command::Eret {
                    offset,
                    length,
                    path,
                },
                (Direction::Get, None) => Command::Retr(path),
                (Direction::Put, _) => Command::Stor(path),
            },
            Kind::Cksm => Command::Cksm {
                algorithm: self.cksm.clone().unwrap_or_default(),
                offset: 0,
                length: None,
                path,
            },
            Kind::Abor => Command::Abor,
        }
    }
}

/// What one reply meant for a file.
#[derive(Debug, Clone, PartialEq)]
pub enum FileEvent {
    /// `150` (`reused` false) or `125` (`reused` true) to the transfer command: move the data
    /// now. Also given for a file that already failed (its `REST` was refused, so the pipelined
    /// transfer moves the whole file): the driver drains or aborts that data.
    DataStart {
        /// The file's index.
        file: usize,
        /// The server reuses the cached data connections.
        reused: bool,
    },
    /// A `111` range marker during the transfer, as the marker states them: ranges the
    /// receiver now holds. The driver unions them with what it holds.
    RestartMarker {
        /// The file's index.
        file: usize,
        /// The ranges the marker names.
        ranges: RangeSet,
    },
    /// A `112` performance marker during the transfer.
    Perf {
        /// The file's index.
        file: usize,
        /// The marker.
        marker: PerfMarker,
    },
    /// A 2yz (`226`, `250`) to the transfer command after its data phase: the data moved.
    Moved {
        /// The file's index.
        file: usize,
    },
    /// `213` to `CKSM`: the server's digest, the reply's last word.
    Checksum {
        /// The file's index.
        file: usize,
        /// The digest as the server wrote it.
        digest: String,
    },
    /// Every command of the file was answered successfully.
    Done {
        /// The file's index.
        file: usize,
    },
    /// The file's first failing reply; its later replies are consumed without events (but for
    /// [`FileEvent::DataStart`] and [`FileEvent::Aborted`]).
    Failed {
        /// The file's index.
        file: usize,
        /// The command refused.
        command: Command,
        /// The server's reply.
        reply: Reply,
    },
    /// The transfer [`Transfers::abort`] cut short is over: its final reply and the `ABOR`'s
    /// reply both came. The file gets no `Done`; a file that had already failed (its `REST`
    /// refused, so the transfer moved the whole file) gets `Aborted` after its `Failed`.
    Aborted {
        /// The file's index.
        file: usize,
    },
}

/// A reply the transfer sequence cannot accept.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TransferError {
    /// A reply while no command was outstanding; the machine is unchanged.
    #[error("unsolicited reply: {0}")]
    Unsolicited(Reply),
    /// A reply out of sequence for the command it answers: for example `150` to `REST` or
    /// `CKSM`, `350` to `RETR`, `226` to `RETR` before any `150`, a second `150`. The reply is
    /// consumed, and the file counts as failed: it gets no further events.
    #[error("`{command}` got an unexpected reply: {reply}")]
    Unexpected {
        /// The index of the file the command belongs to.
        file: usize,
        /// The command the reply answers.
        command: Command,
        /// The reply.
        reply: Reply,
    },
}

/// Which of a file's commands a pipelined command is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Allo,
    Rest,
    Transfer,
    Cksm,
    Abor,
}

/// A pipelined command: the file it belongs to and which of its commands it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tag {
    file: usize,
    kind: Kind,
}

/// Where a file's abort is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Abort {
    /// Not aborted.
    No,
    /// `ABOR` written; the transfer's final reply is still due.
    Sent,
    /// The transfer's final reply came (the `ABOR`'s is due until `unanswered` says not).
    Over,
}

/// One pushed file not yet finished and reported.
#[derive(Debug)]
struct Slot {
    op: FileOp,
    /// How many of its commands were written.
    written: usize,
    /// Commands written (`ABOR` included) and not finally answered.
    unanswered: usize,
    /// Between the transfer's `150` / `125` and its final reply.
    data: bool,
    failed: bool,
    abort: Abort,
    /// [`FileEvent::Done`] is due through [`Transfers::poll_event`].
    done_due: bool,
}

impl Slot {
    /// The next command to write: none once the file failed or was aborted.
    fn next_kind(&self) -> Option<Kind> {
        if self.failed || self.abort != Abort::No {
            return None;
        }
        self.op.kinds().nth(self.written)
    }

    /// Every command written is answered and none is left to write.
    fn finished(&self) -> bool {
        self.written > 0 && self.unanswered == 0 && self.next_kind().is_none()
    }
}

/// The sequencer of pipelined file transfers.
///
/// In: the files to move ([`Transfers::push`]) and each reply the driver reads
/// ([`Transfers::handle_reply`]). Out: the next command to write ([`Transfers::poll_command`]),
/// keeping the commands of at most `window` files in flight, and [`FileEvent`]s telling the
/// driver when to move data and how each file ended.
///
/// Replies are matched to commands oldest first (RFC 959) with a [`Pipeline`]. A command
/// returned by `poll_command` or [`Transfers::abort`] counts as written. A file whose command
/// fails sends nothing more that was not yet written. One reply can finish a file too (the
/// `226` of a transfer without `CKSM`, the `213` of its `CKSM`): `handle_reply` returns the first
/// event and [`Transfers::poll_event`] the [`FileEvent::Done`] that follows.
///
/// Everything is bounded by what was pushed: per file at most four commands and one `ABOR`;
/// replies never add state.
#[derive(Debug)]
pub struct Transfers {
    window: usize,
    /// Files pushed and not yet finished and reported; `slots[0]` is file `base`.
    slots: VecDeque<Slot>,
    base: usize,
    pipeline: Pipeline<Tag>,
}

impl Transfers {
    /// A sequencer keeping the commands of up to `window` files in flight (at least 1).
    pub fn new(window: usize) -> Transfers {
        Transfers {
            window: window.max(1),
            slots: VecDeque::new(),
            base: 0,
            pipeline: Pipeline::new(),
        }
    }

    /// Queues a file; returns its index (0, 1, 2, … in push order).
    pub fn push(&mut self, op: FileOp) -> usize {
        self.slots.push_back(Slot {
            op,
            written: 0,
            unanswered: 0,
            data: false,
            failed: false,
            abort: Abort::No,
            done_due: false,
        });
        self.base + self.slots.len() - 1
    }

    /// The next command to write, if the window allows one: a file's commands are `ALLO` (with
    /// [`FileOp::allocate`], uploads only), `REST` (with [`FileOp::restart`]), `RETR` / `ERET`
    /// / `STOR`, `CKSM` (with [`FileOp::cksm`]), and a file starts only while fewer than
    /// `window` files are in flight.
    pub fn poll_command(&mut self) -> Option<Command> {
        let in_flight = self.in_flight();
        let i = self.slots.iter().position(|s| s.next_kind().is_some())?;
        let s = &mut self.slots[i];
        if s.written == 0 && in_flight >= self.window {
            return None;
        }
        let kind = s.next_kind()?;
        s.written += 1;
        s.unanswered += 1;
        self.pipeline.push(Tag {
            file: self.base + i,
            kind,
        });
        Some(s.op.command(kind))
    }

    /// Feeds one reply read from the server; returns what it meant, if anything (markers with
    /// unparsable text, and replies of a failed file, mean nothing). When the reply also
    /// finished its file, [`Transfers::poll_event`] then gives [`FileEvent::Done`].
    pub fn handle_reply(&mut self, r: Reply) -> Result<Option<FileEvent>, TransferError> {
        let ev = self
            .pipeline
            .handle_reply(r)
            .map_err(|PipelineError::Unsolicited(r)| TransferError::Unsolicited(r))?;
        let res = match ev {
            Event::Marker { tag, reply } => Ok(self.on_marker(tag, &reply)),
            Event::Preliminary { tag, reply } => self.on_preliminary(tag, reply),
            Event::Final { tag, reply } => {
                let res = self.on_final(tag, reply);
                self.answered(tag.file);
                res
            }
        };
        self.retire();
        res
    }

    /// The next event a reply left over: [`FileEvent::Done`] for a file whose last reply
    /// already gave another event.
    pub fn poll_event(&mut self) -> Option<FileEvent> {
        let i = self.slots.iter().position(|s| s.done_due)?;
        self.slots[i].done_due = false;
        let file = self.base + i;
        self.retire();
        Some(FileEvent::Done { file })
    }

    /// Aborts the transfer in its data phase (after its `150` / `125`, before its final reply):
    /// returns `ABOR` to write at once, or None when no transfer is in that phase or it is
    /// already being aborted. The file writes nothing more. The server is then expected to
    /// answer the transfer (`426`, or `226` if it finished first) and right after it the `ABOR`
    /// (`226` / `225`), ahead of any command pipelined behind the transfer, as servers that act
    /// on `ABOR` as soon as they read it do (RFC 959 §4.1.3); once both came,
    /// [`FileEvent::Aborted`] is given. The file's `CKSM`, if written, is answered later and
    /// consumed without an event.
    pub fn abort(&mut self) -> Option<Command> {
        let tag = *self.pipeline.front()?;
        if tag.kind != Kind::Transfer {
            return None;
        }
        let s = self.slot(tag.file)?;
        if !s.data || s.abort != Abort::No {
            return None;
        }
        s.abort = Abort::Sent;
        s.unanswered += 1;
        self.pipeline.push_next(Tag {
            file: tag.file,
            kind: Kind::Abor,
        });
        Some(Command::Abor)
    }

    /// True when every pushed file finished (or failed, or was aborted), its events were
    /// taken, and no command is outstanding.
    pub fn is_done(&self) -> bool {
        self.slots.is_empty() && self.pipeline.is_empty()
    }

    /// Files with commands written and not all answered.
    pub fn in_flight(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.written > 0 && !s.finished())
            .count()
    }

    /// Commands written and not yet finally answered (`ABOR` included): while zero, no reply
    /// is due.
    pub fn outstanding(&self) -> usize {
        self.pipeline.len()
    }

    /// Files pushed and not yet finished (or whose [`FileEvent::Done`] was not yet taken).
    pub fn pending(&self) -> usize {
        self.slots.len()
    }

    /// The window: how many files may have commands in flight.
    pub fn window(&self) -> usize {
        self.window
    }

    fn slot(&mut self, file: usize) -> Option<&mut Slot> {
        let i = file.checked_sub(self.base)?;
        self.slots.get_mut(i)
    }

    /// A 111 / 112 marker: reported while the file's transfer runs and the file has not failed.
    fn on_marker(&mut self, tag: Tag, reply: &Reply) -> Option<FileEvent> {
        let s = self.slot(tag.file)?;
        if tag.kind != Kind::Transfer || s.failed {
            return None;
        }
        let file = tag.file;
        match reply.code {
            111 => parse_range_marker(&reply.text())
                .map(|ranges| FileEvent::RestartMarker { file, ranges }),
            _ => {
                PerfMarker::from_lines(&reply.lines).map(|marker| FileEvent::Perf { file, marker })
            }
        }
    }

    /// Another 1yz: the transfer's `150` / `125`; any other 1yz to a transfer is a marker of no
    /// known kind, and a 1yz to any other command is out of sequence.
    fn on_preliminary(
        &mut self,
        tag: Tag,
        reply: Reply,
    ) -> Result<Option<FileEvent>, TransferError> {
        let file = tag.file;
        let Some(s) = self.slot(file) else {
            return Ok(None);
        };
        let opening = matches!(reply.code, 150 | 125);
        match tag.kind {
            Kind::Transfer if opening && !s.data => {
                s.data = true;
                let reused = reply.code == 125;
                Ok(Some(FileEvent::DataStart { file, reused }))
            }
            Kind::Transfer if !opening => Ok(None),
            _ if s.failed || s.abort != Abort::No => Ok(None),
            kind => Err(self.unexpected(file, kind, reply)),
        }
    }

    /// A final reply: what it means for the command it completes.
    fn on_final(&mut self, tag: Tag, reply: Reply) -> Result<Option<FileEvent>, TransferError> {
        let file = tag.file;
        let Some(s) = self.slot(file) else {
            return Ok(None);
        };
        let ok = (200..300).contains(&reply.code);
        match tag.kind {
            Kind::Transfer => {
                let data = std::mem::take(&mut s.data);
                if s.abort == Abort::Sent {
                    s.abort = Abort::Over;
                    return Ok(None);
                }
                if s.failed {
                    return Ok(None);
                }
                if ok && data {
                    return Ok(Some(FileEvent::Moved { file }));
                }
                if reply.code >= 400 {
                    return Ok(Some(self.fail(file, Kind::Transfer, reply)));
                }
                Err(self.unexpected(file, Kind::Transfer, reply))
            }
            Kind::Abor => {
                if ok {
                    return Ok(Some(FileEvent::Aborted { file }));
                }
                Err(self.unexpected(file, Kind::Abor, reply))
            }
            _ if s.failed || s.abort != Abort::No => Ok(None),
            Kind::Rest if reply.code == 350 => Ok(None),
            // Advisory: only "no space" (452) says the upload cannot succeed.
            Kind::Allo if reply.code != 452 => Ok(None),
            Kind::Cksm if reply.code == 213 => {
                let text = reply.text();
                let digest = text.split_whitespace().next_back().unwrap_or_default();
                let digest = digest.to_string();
                Ok(Some(FileEvent::Checksum { file, digest }))
            }
            kind => Ok(Some(self.fail(file, kind, reply))),
        }
    }

    /// Marks `file` failed by `reply` to its command `kind`.
    fn fail(&mut self, file: usize, kind: Kind, reply: Reply) -> FileEvent {
        let command = self.mark_failed(file, kind);
        FileEvent::Failed {
            file,
            command,
            reply,
        }
    }

    /// Marks `file` failed by a reply out of sequence to its command `kind`.
    fn unexpected(&mut self, file: usize, kind: Kind, reply: Reply) -> TransferError {
        let command = self.mark_failed(file, kind);
        TransferError::Unexpected {
            file,
            command,
            reply,
        }
    }

    /// Marks `file` failed; returns its command of kind `kind`.
    fn mark_failed(&mut self, file: usize, kind: Kind) -> Command {
        match self.slot(file) {
            Some(s) => {
                s.failed = true;
                s.op.command(kind)
            }
            None => Command::Noop,
        }
    }

    /// One of `file`'s commands got its final reply; a file that finished well owes a Done.
    fn answered(&mut self, file: usize) {
        if let Some(s) = self.slot(file) {
            s.unanswered = s.unanswered.saturating_sub(1);
            if s.finished() && !s.failed && s.abort == Abort::No {
                s.done_due = true;
            }
        }
    }

    /// Drops the finished files at the front whose events were all given.
    fn retire(&mut self) {
        while self
            .slots
            .front()
            .is_some_and(|s| s.finished() && !s.done_due)
        {
            self.slots.pop_front();
            self.base += 1;
        }
    }
}

#[cfg(test)]
#[path = "transfer_tests.rs"]
mod tests;
