//! The driver of haul-proto's `server::Session`: writes its replies, performs the TLS upgrade of
//! the control connection, checks passwords (argon2 on the verifier threads, the per-user
//! session limit, the back-off after failed logins), hands its data-channel actions to `data`
//! and routes the commands it forwards.

use std::io;
use std::time::{Duration, Instant};

use haul_gsi::ftp;
use haul_proto::server::{AdatReply, ServerAction, Verdict};
use haul_proto::Reply;

use super::{Flow, Session, Shared};
use crate::auth::{is_anonymous, Access};

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

/// A session's GSI state.
#[derive(Default)]
pub(crate) struct GsiState {
    /// The `AUTH GSSAPI` exchange under way.
    ctx: Option<haul_gsi::Context>,
    /// The client, once authenticated.
    pub(crate) peer: Option<haul_gsi::Peer>,
    /// The credential it delegated, if it did (for a relay's `gsiftp://` next hops).
    pub(crate) delegated: Option<haul_gsi::Credential>,
    /// What its data connections present (`DCAU`).
    pub(crate) data: Option<haul_transport::gsi::DataCredential>,
}

/// Failures older than this are forgotten.
const FAILURE_MEMORY: Duration = Duration::from_secs(600);

/// The wait before answering a failed login: 250 ms, doubling with each recent failure from the
/// same address, at most 8 s.
fn backoff(failures: u32) -> Duration {
    Duration::from_millis(250u64 << failures.saturating_sub(1).min(5))
}

impl Session<'_> {
    /// Performs the session machine's actions until it has none; `Close` ends the session.
    pub(super) fn perform(&mut self) -> io::Result<Flow> {
        while let Some(action) = self.machine.poll_action() {
            match action {
                ServerAction::Reply(r) => self.ctl.send(&r)?,
                ServerAction::Defer(r) => self.ctl.defer(&r),
                ServerAction::Forward(cmd) => self.route(cmd)?,
                ServerAction::StartTls => {
                    let upgraded = match self.shared.tls() {
                        Some(cfg) => self.ctl.upgrade(cfg),
                        None => Err(io::Error::other("no TLS configuration")),
                    };
                    match upgraded {
                        Ok(()) => self.machine.login().tls_established(),
                        Err(e) => {
                            tracing::warn!(error = %e, "TLS upgrade of the control connection failed");
                            self.machine.login().tls_failed();
                        }
                    }
                }
                ServerAction::StartGss => {
                    self.gsi.ctx = self.shared.gsi().and_then(|g| {
                        haul_gsi::Context::accept(g.acceptor.clone(), g.policy.clone(), false)
                            .map_err(|e| tracing::warn!(error = %e, "GSS context"))
                            .ok()
                    });
                }
                ServerAction::Adat(token) => {
                    let r = self.adat(&token);
                    self.machine.login().adat_result(r);
                }
                ServerAction::ProtectControl => self.protect_control()?,
                ServerAction::Verify { user, pass } => {
                    let verdict = self.verify(&user, &pass)?;
                    self.machine.login().handle_verified(verdict);
                }
                ServerAction::Close => return Ok(Flow::Close),
                data => self.data_action(data)?,
            }
        }
        debug_assert_eq!(self.ctl.is_tls(), self.machine.login_state().is_tls());
        debug_assert_eq!(self.ctl.is_gsi(), self.machine.login_state().is_gsi());
        Ok(Flow::Continue)
    }

    /// Steps the GSS exchange with one `ADAT` token.
    fn adat(&mut self, token: &str) -> AdatReply {
        let Some(ctx) = self.gsi.ctx.as_mut() else {
            return AdatReply::Failed("no GSSAPI exchange under way".into());
        };
        let step = ftp::decode(token)
            .map_err(|e| e.to_string())
            .and_then(|t| ctx.step(&t).map_err(|e| e.to_string()));
        match step {
            Ok(s) if s.done => {
                let last = (!s.token.is_empty()).then(|| ftp::encode(&s.token));
                AdatReply::Done(last)
            }
            Ok(s) => AdatReply::Continue(ftp::encode(&s.token)),
            Err(why) => {
                tracing::warn!(peer = %self.peer, error = %why, "GSSAPI authentication failed");
                self.gsi.ctx = None;
                AdatReply::Failed(why)
            }
        }
    }

    /// After the `235`: every later command and reply on the control connection is wrapped
    /// by the context, and data connections will present the delegated credential.
    fn protect_control(&mut self) -> io::Result<()> {
        self.ctl.flush()?;
        let (Some(mut ctx), Some(g)) = (self.gsi.ctx.take(), self.shared.gsi()) else {
            return Err(io::Error::other("GSS context missing after 235"));
        };
        self.gsi.peer = ctx.peer().cloned();
        self.gsi.delegated = ctx.take_delegated();
        let did_delegate = self.gsi.delegated.is_some();
        self.gsi.data = Some(g.data_credential(self.gsi.delegated.clone()));
        if let Some(p) = &self.gsi.peer {
            tracing::info!(peer = %self.peer, subject = %p.subject, identity = %p.identity, delegated = did_delegate, "GSSAPI authenticated");
        }
        self.ctl.protect(ctx);
        Ok(())
    }

    /// The access of a GSI client logging in as `requested` (`:globus-mapping:` for its default
    /// account): the account its identity maps to in the grid-mapfile, with the rights the users
    /// file gives that account, else the rights GSI's settings give mapped accounts.
    fn gsi_access(&self, requested: &str) -> Option<(String, Access)> {
        let g = self.shared.gsi()?;
        let peer = self.gsi.peer.as_ref()?;
        let Some(account) = g.gridmap.map(&peer.identity, requested) else {
            tracing::warn!(identity = %peer.identity, requested, "not in the grid-mapfile");
            return None;
        };
        let access = self.shared.users().access(&account).unwrap_or(g.access);
        Some((account, access))
    }

    /// Checks a login: under GSI by the grid-mapfile; else anonymous by the configuration, a
    /// named user by the users file; then the per-user session limit. A failure waits the
    /// back-off first.
    fn verify(&mut self, requested: &str, pw: &str) -> io::Result<Verdict> {
        let cfg = &self.shared.cfg;
        let mut name = requested.to_string();
        let access = if self.gsi.peer.is_some() {
            self.gsi_access(requested).map(|(account, a)| {
                name = account;
                a
            })
        } else if is_anonymous(&name) {
            cfg.anonymous.then_some(Access {
                write: cfg.anonymous_write,
                third_party: false,
                relay: cfg.relay.as_ref().is_some_and(|r| r.anonymous_may_relay()),
            })
        } else {
            self.shared.users().verify(&name, pw)
        };
        let Some(a) = access else {
            self.login_failed(&name)?;
            return Ok(Verdict::Rejected);
        };
        if !is_anonymous(&name) {
            let max = cfg.max_sessions_per_user;
            let mut m = self
                .shared
                .per_user
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let n = m.entry(name.to_string()).or_insert(0);
            if *n >= max {
                drop(m);
                tracing::warn!(user = %name, max, "session limit per user reached");
                self.shared.event(crate::journal::ServerEvent::Refused(
                    "max_sessions_per_user",
                ));
                return Ok(Verdict::Refused(Reply::new(
                    421,
                    format!("Too many sessions for {name} (limit {max}); try again later."),
                )));
            }
            *n += 1;
            drop(m);
            self.user_slot = Some(UserSlot {
                shared: self.shared,
                name: name.to_string(),
            });
        }
        self.shared
            .failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.peer);
        self.anonymous = is_anonymous(&name);
        self.user_name = name.to_string();
        self.access = Some(a);
        self.machine.transfers().set_third_party(a.third_party);
        tracing::info!(user = %name, write = a.write, third_party = a.third_party, "login");
        if name != requested {
            return Ok(Verdict::AcceptedAs(name));
        }
        Ok(Verdict::Accepted)
    }

    /// A failed login: waits the back-off for this address's recent failures before the login
    /// machine answers `530` (and closes the session at its limit).
    fn login_failed(&mut self, name: &str) -> io::Result<()> {
        self.shared.event(crate::journal::ServerEvent::LoginFailed);
        let failures = self.machine.login_state().failures() + 1;
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
        tracing::warn!(user = %name, peer = %self.peer, failures, recent, "login failed");
        self.ctl.flush()?;
        // Never past the login deadline, which then closes the session.
        std::thread::sleep(
            backoff(recent).min(self.login_by.saturating_duration_since(Instant::now())),
        );
        Ok(())
    }
}
