//! The login family: USER, PASS (with the per-user session limit and the back-off after failed
//! logins), AUTH TLS, PBSZ, PROT and QUIT.

use std::io;
use std::time::{Duration, Instant};

use haul_proto::command::ProtLevel;
use haul_proto::Command;

use super::{Flow, Session, Shared};
use crate::auth::{is_anonymous, Access};

/// Failed logins after which the session is closed.
const MAX_LOGIN_FAILURES: u32 = 3;

/// One session of a named user, counted against `max_sessions_per_user` until dropped.
pub(super) struct UserSlot<'a> {
    shared: &'a Shared,
    name: String,
}

impl Drop for UserSlot<'_> {
    fn drop(&mut self) {
        let mut m = self
            .shared
            .per_user
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.name) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.name);
            }
        }
    }
}

/// Failures older than this are forgotten.
const FAILURE_MEMORY: Duration = Duration::from_secs(600);

/// The wait before answering a failed login: 250 ms, doubling with each recent failure from the
/// same address, at most 8 s.
fn backoff(failures: u32) -> Duration {
    Duration::from_millis(250u64 << failures.saturating_sub(1).min(5))
}

impl Session<'_> {
    /// Answers a command of the login family: USER, PASS, AUTH, PBSZ, PROT or QUIT.
    pub(super) fn login_command(&mut self, cmd: Command) -> io::Result<Flow> {
        match cmd {
            Command::User(name) => self.cmd_user(name)?,
            Command::Pass(pw) => return self.cmd_pass(&pw),
            Command::Quit => {
                self.ctl.reply(221, "Goodbye.")?;
                return Ok(Flow::Close);
            }
            Command::Auth(mech) => return self.cmd_auth(&mech),
            Command::Pbsz(_) => self.ctl.reply(200, "PBSZ=0")?,
            Command::Prot(level) => self.cmd_prot(level)?,
            _ => unreachable!("dispatch routes only login commands here"),
        }
        Ok(Flow::Continue)
    }

    fn cmd_user(&mut self, name: String) -> io::Result<()> {
        if self.access.is_some() {
            return self.ctl.reply(503, "Already logged in.");
        }
        self.ctl
            .reply(331, format!("Password required for {name}."))?;
        self.user = Some(name);
        Ok(())
    }

    fn cmd_pass(&mut self, pw: &str) -> io::Result<Flow> {
        if self.access.is_some() {
            self.ctl.reply(503, "Already logged in.")?;
            return Ok(Flow::Continue);
        }
        let Some(name) = self.user.take() else {
            self.ctl.reply(503, "Login with USER first.")?;
            return Ok(Flow::Continue);
        };
        let cfg = &self.shared.cfg;
        let access = if is_anonymous(&name) {
            cfg.anonymous.then_some(Access {
                write: cfg.anonymous_write,
                third_party: false,
            })
        } else {
            self.shared.users.verify(&name, pw)
        };
        let Some(a) = access else {
            return self.login_failed(&name);
        };
        if !is_anonymous(&name) {
            let max = cfg.max_sessions_per_user;
            let mut m = self
                .shared
                .per_user
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let n = m.entry(name.clone()).or_insert(0);
            if *n >= max {
                drop(m);
                tracing::warn!(user = %name, max, "session limit per user reached");
                self.ctl.reply(
                    421,
                    format!("Too many sessions for {name} (limit {max}); try again later."),
                )?;
                return Ok(Flow::Close);
            }
            *n += 1;
            drop(m);
            self.user_slot = Some(UserSlot {
                shared: self.shared,
                name: name.clone(),
            });
        }
        self.shared
            .failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.peer);
        self.anonymous = is_anonymous(&name);
        self.access = Some(a);
        tracing::info!(user = %name, write = a.write, third_party = a.third_party, "login");
        self.ctl.reply(230, format!("User {name} logged in."))?;
        Ok(Flow::Continue)
    }

    /// A failed login: waits the back-off for this address's recent failures, answers `530`, and
    /// closes the session after [`MAX_LOGIN_FAILURES`].
    fn login_failed(&mut self, name: &str) -> io::Result<Flow> {
        self.failures += 1;
        let recent = {
            let mut m = self
                .shared
                .failures
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            if m.len() > 65_536 {
                m.retain(|_, (_, last)| now.duration_since(*last) < FAILURE_MEMORY);
            }
            let e = m.entry(self.peer).or_insert((0, now));
            if now.duration_since(e.1) >= FAILURE_MEMORY {
                e.0 = 0;
            }
            *e = (e.0 + 1, now);
            e.0
        };
        tracing::warn!(user = %name, peer = %self.peer, failures = self.failures, recent, "login failed");
        self.ctl.flush()?;
        // Never past the login deadline, which then closes the session.
        std::thread::sleep(
            backoff(recent).min(self.login_by.saturating_duration_since(Instant::now())),
        );
        self.ctl.reply(530, "Login incorrect.")?;
        if self.failures >= MAX_LOGIN_FAILURES {
            self.ctl
                .reply(421, "Too many failed logins; closing control connection.")?;
            return Ok(Flow::Close);
        }
        Ok(Flow::Continue)
    }

    fn cmd_auth(&mut self, mech: &str) -> io::Result<Flow> {
        let Some(cfg) = self.shared.tls.clone() else {
            self.ctl.reply(
                502,
                "AUTH not available: this server has no TLS certificate.",
            )?;
            return Ok(Flow::Continue);
        };
        if mech != "TLS" && mech != "TLS-C" && mech != "SSL" {
            self.ctl
                .reply(504, format!("AUTH {mech} not supported; use AUTH TLS."))?;
            return Ok(Flow::Continue);
        }
        if self.ctl.is_tls() {
            self.ctl
                .reply(503, "Control connection already protected by TLS.")?;
            return Ok(Flow::Continue);
        }
        self.ctl.reply(234, "AUTH TLS successful.")?;
        if let Err(e) = self.ctl.upgrade(cfg) {
            tracing::warn!(error = %e, "TLS upgrade of the control connection failed");
            return Ok(Flow::Close);
        }
        Ok(Flow::Continue)
    }

    fn cmd_prot(&mut self, level: ProtLevel) -> io::Result<()> {
        match level {
            ProtLevel::Clear => {
                self.prot_private = false;
                self.ctl.reply(200, "Protection level set to C.")
            }
            ProtLevel::Private if self.ctl.is_tls() => {
                self.prot_private = true;
                self.ctl.reply(200, "Protection level set to P.")
            }
            ProtLevel::Private => self.ctl.reply(503, "PROT P needs AUTH TLS first."),
            _ => self.ctl.reply(536, "Only PROT C and PROT P are supported."),
        }
    }
}
