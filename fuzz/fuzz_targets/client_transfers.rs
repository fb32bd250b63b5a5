//! Fuzzes the client's transfer sequencer (`client::Transfers`) with a server's bytes and a
//! driver's decisions. The first byte sets the window (1-8) and the number of files (0-7, some
//! pushed only when the driver decides to), one byte per file its operation (`STOR` / `RETR` /
//! `ERET`, `REST` ranges, `CKSM`); the bytes up to the first `0xFF` are the server's, which
//! `ReplyParser` splits into replies; the bytes after it are the driver's decisions, one per
//! step (poll one command, feed the next reply with or without taking the events left over,
//! `abort()`, take the events, push the next file, or the plain step once they run out: write
//! everything due, feed the next reply, take the events).
//!
//! It may not panic. Each file's commands are written in the order `REST`?, `RETR` | `ERET` |
//! `STOR`, `CKSM`?, nothing after its end, and never more than `window` files have commands
//! unanswered (nor count as in flight). Replies answer the oldest command (`ABOR` right behind
//! the transfer it cuts short): every event names the file of the command the reply answers and
//! fits that command and reply (`DataStart` only to the file's transfer command, once), a
//! `Failed` or `Unexpected` names that command and reply. A file ends once: `Done` (after
//! `Moved`, and `Checksum` if it asked for one), `Failed` or an `Unexpected` (its `ABOR`'s
//! `Aborted` may still follow, as documented), or `Aborted`; once `is_done()`, every file
//! pushed has ended. `abort()` gives `ABOR` exactly while the oldest command is a transfer in its
//! data phase not yet aborted. `outstanding()` is the number of commands written and not
//! finally answered, replies never grow `outstanding()` or `pending()`, an `Unsolicited` reply
//! comes exactly when nothing is outstanding and leaves the machine as it was, and
//! `poll_command` withholds nothing due: with nothing written, nothing left and the replies all
//! in, every file has ended.

#![no_main]

use std::collections::VecDeque;

use haul_proto::client::{FileEvent, FileOp, TransferError, Transfers};
use haul_proto::{Command, Reply};
use libfuzzer_sys::fuzz_target;

#[path = "common/replies.rs"]
mod common;
#[path = "client_transfers/input.rs"]
mod input;
#[path = "client_transfers/model.rs"]
mod model;
use input::{decode, Decisions};
use model::{done_event, reply_event, unexpected, Answered, File};

/// The driver, with what it knows of each file and of the commands on the wire.
struct Driver {
    t: Transfers,
    window: usize,
    ops: Vec<FileOp>,
    files: Vec<File>,
    /// Commands written and not finally answered, in the order the server answers them.
    wire: VecDeque<(usize, Command)>,
    replies: VecDeque<Reply>,
}

impl Driver {
    fn push(&mut self) -> bool {
        let Some(op) = self.ops.get(self.files.len()) else {
            return false;
        };
        let pending = self.t.pending();
        assert_eq!(self.t.push(op.clone()), self.files.len(), "push's index");
        assert_eq!(self.t.pending(), pending + 1);
        self.files.push(File::new(op));
        true
    }

    /// One `poll_command`; false when it wrote nothing.
    fn poll(&mut self) -> bool {
        let Some(c) = self.t.poll_command() else {
            self.withheld();
            return false;
        };
        let (f, k) = self
            .files
            .iter()
            .enumerate()
            .find_map(|(f, s)| s.cmds.iter().position(|x| *x == c).map(|k| (f, k)))
            .unwrap_or_else(|| panic!("{c} is no pushed file's command"));
        let s = &mut self.files[f];
        assert!(
            !s.ended() && !s.failed(),
            "{c} written after file {f}'s end: {s:?}"
        );
        assert!(!s.abor_sent, "{c} written after file {f}'s ABOR");
        assert_eq!(k, s.written, "{c} out of order for file {f}: {:?}", s.cmds);
        s.written += 1;
        self.wire.push_back((f, c));
        true
    }

    /// `poll_command` gave nothing: no started file has a command left, and no file waits to
    /// start unless the window is full.
    fn withheld(&self) {
        if let Some(f) = self.files.iter().position(File::writable) {
            panic!("file {f} has commands left: {:?}", self.files[f]);
        }
        if self.files.iter().any(|s| s.written == 0) {
            assert!(
                self.in_flight() >= self.window,
                "a file waits with the window open"
            );
        }
    }

    fn poll_all(&mut self) {
        while self.poll() {}
    }

    /// Files with commands written and not all answered, or with commands left to write.
    fn in_flight(&self) -> usize {
        let on_wire = |f: usize| self.wire.iter().any(|&(g, _)| g == f);
        let busy = |(f, s): (usize, &File)| s.written > 0 && (on_wire(f) || s.writable());
        self.files.iter().enumerate().filter(|&x| busy(x)).count()
    }

    /// Feeds the next reply; false when none is left.
    fn feed(&mut self, take_events: bool) -> bool {
        let Some(r) = self.replies.pop_front() else {
            return false;
        };
        let before = self.wire.is_empty().then(|| format!("{:?}", self.t));
        let (pending, outstanding) = (self.t.pending(), self.t.outstanding());
        let res = self.t.handle_reply(r.clone());
        assert!(self.t.pending() <= pending && self.t.outstanding() <= outstanding);
        let Some((file, command)) = self.wire.front().cloned() else {
            match res {
                Err(TransferError::Unsolicited(x)) => assert_eq!(x, r),
                other => panic!("{other:?} for {r} with nothing outstanding"),
            }
            assert_eq!(before, Some(format!("{:?}", self.t)), "changed by {r}");
            return true;
        };
        if !r.is_preliminary() {
            self.wire.pop_front();
        }
        let a = Answered {
            file,
            command: &command,
            reply: &r,
        };
        match res {
            Ok(Some(ev)) => reply_event(&mut self.files, &ev, &a),
            Ok(None) => {}
            Err(TransferError::Unexpected {
                file: f,
                command: c,
                reply,
            }) => {
                assert_eq!(
                    (f, &c, &reply),
                    (file, &command, &r),
                    "Unexpected names another"
                );
                unexpected(&mut self.files, &a);
            }
            Err(e) => panic!("{e} with {command} of file {file} outstanding"),
        }
        if take_events {
            self.take_events();
        }
        true
    }

    fn take_events(&mut self) {
        loop {
            let (pending, outstanding) = (self.t.pending(), self.t.outstanding());
            let Some(ev) = self.t.poll_event() else {
                return;
            };
            assert!(self.t.pending() <= pending && self.t.outstanding() == outstanding);
            let f = match ev {
                FileEvent::Done { file } => file,
                _ => panic!("{ev:?} from poll_event"),
            };
            let on_wire = self.wire.iter().any(|&(g, _)| g == f);
            done_event(&mut self.files, &ev, on_wire);
        }
    }

    fn abort(&mut self) {
        let due = match self.wire.front() {
            Some((f, c)) => {
                let s = &self.files[*f];
                s.is_transfer(c) && s.data && !s.abor_sent
            }
            None => false,
        };
        let got = self.t.abort();
        assert_eq!(
            got.is_some(),
            due,
            "abort() gave {got:?} with {:?}",
            self.wire.front()
        );
        let Some(c) = got else {
            return;
        };
        assert_eq!(c, Command::Abor);
        let f = self.wire[0].0;
        self.files[f].abor_sent = true;
        let at = self.wire.len().min(1);
        self.wire.insert(at, (f, c));
    }

    fn plain(&mut self) {
        self.poll_all();
        self.feed(true);
    }

    /// What must hold between any two steps.
    fn check(&self) {
        assert_eq!(self.t.outstanding(), self.wire.len(), "outstanding()");
        assert_eq!(self.t.window(), self.window);
        let mut on_wire: Vec<usize> = self.wire.iter().map(|&(f, _)| f).collect();
        on_wire.sort_unstable();
        on_wire.dedup();
        assert!(
            on_wire.len() <= self.window,
            "files {on_wire:?} on the wire"
        );
        assert_eq!(self.t.in_flight(), self.in_flight(), "in_flight()");
        assert!(self.t.in_flight() <= self.window);
        assert!(self.t.pending() <= self.files.len());
        if self.t.is_done() {
            assert!(
                self.wire.is_empty(),
                "done with {:?} outstanding",
                self.wire
            );
            assert_eq!(self.t.pending(), 0);
            if let Some(f) = self.files.iter().position(|s| !s.ended()) {
                panic!("done, but file {f} never ended: {:?}", self.files[f]);
            }
        }
    }

    /// The replies are in: write what is due and take the events. With nothing outstanding,
    /// every file has ended and the machine is done.
    fn finish(&mut self) {
        self.poll_all();
        self.take_events();
        self.check();
        if self.wire.is_empty() {
            assert!(self.t.is_done(), "nothing outstanding, yet not done");
        }
    }
}

fn run(data: &[u8]) {
    let input = decode(data);
    let mut d = Driver {
        t: Transfers::new(input.window),
        window: input.window,
        ops: input.ops,
        files: Vec::new(),
        wire: VecDeque::new(),
        replies: input.replies,
    };
    for _ in 0..input.early {
        d.push();
    }
    d.check();
    let mut decisions: Decisions = input.decisions;
    loop {
        let step = match decisions.next() {
            Some(b) => b % 8,
            None if d.replies.is_empty() => break,
            None => 0,
        };
        match step {
            1 => {
                d.poll();
            }
            2 => {
                d.feed(false);
            }
            3 => d.abort(),
            4 => d.take_events(),
            5 if d.push() => {}
            _ => d.plain(),
        }
        d.check();
    }
    d.finish();
}

fuzz_target!(|data: &[u8]| run(data));
