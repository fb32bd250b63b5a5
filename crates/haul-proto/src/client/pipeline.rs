//! [`Pipeline`]: matching the replies of pipelined commands to the commands, oldest first.

use std::collections::VecDeque;

use thiserror::Error;

use crate::Reply;

/// What one reply meant for the pipelined commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<T> {
    /// A 111 restart or 112 performance marker for the oldest unanswered command (a transfer
    /// in progress); the command stays outstanding.
    Marker {
        /// The command's tag.
        tag: T,
        /// The marker.
        reply: Reply,
    },
    /// Another 1yz reply (for example 150, opening the data connection) to the oldest
    /// unanswered command; the command stays outstanding.
    Preliminary {
        /// The command's tag.
        tag: T,
        /// The reply.
        reply: Reply,
    },
    /// A 2yz–5yz reply: it completes the oldest unanswered command.
    Final {
        /// The command's tag.
        tag: T,
        /// The reply.
        reply: Reply,
    },
}

impl<T> Event<T> {
    /// The tag of the command the reply belongs to.
    pub fn tag(&self) -> &T {
        match self {
            Event::Marker { tag, .. }
            | Event::Preliminary { tag, .. }
            | Event::Final { tag, .. } => tag,
        }
    }

    /// The reply.
    pub fn reply(&self) -> &Reply {
        match self {
            Event::Marker { reply, .. }
            | Event::Preliminary { reply, .. }
            | Event::Final { reply, .. } => reply,
        }
    }
}

/// A reply the pipeline could not match.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PipelineError {
    /// A reply arrived while no command was outstanding: a protocol error.
    #[error("unsolicited reply: {0}")]
    Unsolicited(Reply),
}

/// The reply matcher for pipelined commands.
///
/// In: each command the driver writes, as a tag of its choosing ([`Pipeline::push`]), and each
/// reply it reads ([`Pipeline::handle_reply`]). Out: one [`Event`] per reply naming the command
/// it belongs to. Replies come in command order (RFC 959), so every reply belongs to the oldest
/// command not yet finally answered. The queue grows only by the driver's pushes, never by what
/// the server sends.
#[derive(Debug, Clone)]
pub struct Pipeline<T> {
    outstanding: VecDeque<T>,
}

impl<T> Default for Pipeline<T> {
    fn default() -> Self {
        Pipeline::new()
    }
}

impl<T> Pipeline<T> {
    /// An empty pipeline.
    pub fn new() -> Self {
        Pipeline {
            outstanding: VecDeque::new(),
        }
    }

    /// Records a command just written.
    pub fn push(&mut self, tag: T) {
        self.outstanding.push_back(tag);
    }

    /// Records a command the server answers right after the oldest outstanding command's final
    /// reply, ahead of the commands queued behind that one: `ABOR`, which a server acts on while
    /// a transfer runs (RFC 959 §4.1.3), answering the transfer and then the `ABOR`. With
    /// nothing outstanding it is simply the next command.
    pub fn push_next(&mut self, tag: T) {
        let at = self.outstanding.len().min(1);
        self.outstanding.insert(at, tag);
    }

    /// Commands written and not yet finally answered.
    pub fn len(&self) -> usize {
        self.outstanding.len()
    }

    /// True when every command written has its final reply.
    pub fn is_empty(&self) -> bool {
        self.outstanding.is_empty()
    }

    /// The tag of the command the next reply belongs to.
    pub fn front(&self) -> Option<&T> {
        self.outstanding.front()
    }

    /// The outstanding tags, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.outstanding.iter()
    }
}

impl<T: Clone> Pipeline<T> {
    /// Matches one reply to the oldest outstanding command. An unsolicited reply leaves the
    /// pipeline as it was.
    pub fn handle_reply(&mut self, reply: Reply) -> Result<Event<T>, PipelineError> {
        if self.outstanding.is_empty() {
            return Err(PipelineError::Unsolicited(reply));
        }
        Ok(match reply.code {
            111 | 112 => Event::Marker {
                tag: self.outstanding[0].clone(),
                reply,
            },
            100..=199 => Event::Preliminary {
                tag: self.outstanding[0].clone(),
                reply,
            },
            _ => match self.outstanding.pop_front() {
                Some(tag) => Event::Final { tag, reply },
                None => return Err(PipelineError::Unsolicited(reply)),
            },
        })
    }
}
