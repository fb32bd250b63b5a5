//! [`Session`]: the whole server side of a control session, the [`Login`] machine and the
//! [`Transfers`] machine together, with the pipelined commands that arrive during a transfer
//! held back until it ends.

use std::collections::VecDeque;
use std::net::IpAddr;

use super::{DataConfig, Login, LoginConfig, Peers, ServerAction, Transfers};
use crate::Command;

/// Whether `cmd` belongs to the data-transfer family that [`Transfers`] answers.
pub fn is_data_command(cmd: &Command) -> bool {
    matches!(
        cmd,
        Command::Type(_)
            | Command::Stru(_)
            | Command::Mode(_)
            | Command::Allo(_)
            | Command::Sbuf(_)
            | Command::Dcau(_)
            | Command::Rest(_)
            | Command::Abor
            | Command::Port(_)
            | Command::Eprt(_)
            | Command::Spor(_)
            | Command::Pasv
            | Command::Epsv
            | Command::Spas
            | Command::Retr(_)
            | Command::Eret { .. }
            | Command::Stor(_)
            | Command::Appe(_)
            | Command::Esto { .. }
            | Command::List(_)
            | Command::Nlst(_)
            | Command::Mlsd(_)
            | Command::Mlsr(_)
    )
}

/// The server's session machine.
///
/// In: every command the driver read ([`Session::handle_command`]), and the driver's answers to
/// the actions, through [`Session::login`] and [`Session::transfers`]. Out: [`ServerAction`]s
/// ([`Session::poll_action`]); `Forward` carries the commands neither machine answers (the file
/// system, `FEAT`, `OPTS`, `SITE`, and the transfers of a transport the driver runs itself).
/// Commands that arrive while a transfer or a listener is awaited wait in the machine, except
/// `ABOR`, which reaches the transfer at once, ahead of any command held (RFC 959 §4.1.3): its
/// reply follows the transfer's final reply, before the replies of the commands held. The wait queue grows only by what the driver
/// hands over, which its own line reader bounds.
#[derive(Debug)]
pub struct Session {
    login: Login,
    transfers: Transfers,
    held: VecDeque<Command>,
    own_transfers: bool,
}

impl Session {
    /// A new session with the client at `client`; the greeting is the first action.
    pub fn new(login: LoginConfig, data: DataConfig, client: IpAddr) -> Session {
        let peers = Peers {
            client,
            third_party: false,
        };
        Session {
            login: Login::new(login),
            transfers: Transfers::new(data, peers),
            held: VecDeque::new(),
            own_transfers: false,
        }
    }

    /// The login machine, for the driver's answers to its actions.
    pub fn login(&mut self) -> &mut Login {
        &mut self.login
    }

    /// The data-transfer machine, for the driver's answers to its actions and its settings.
    pub fn transfers(&mut self) -> &mut Transfers {
        &mut self.transfers
    }

    /// The login machine, read-only.
    pub fn login_state(&self) -> &Login {
        &self.login
    }

    /// The data-transfer machine, read-only.
    pub fn transfer_state(&self) -> &Transfers {
        &self.transfers
    }

    /// When set, `RETR`, `ERET` and `STOR` are forwarded to the driver, which runs them over a
    /// transport of its own (PLUT) and answers them itself.
    pub fn set_own_transfers(&mut self, own: bool) {
        self.own_transfers = own;
    }

    /// Commands waiting for the end of a transfer or listener.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Feeds one command the client sent. `ABOR` during a transfer reaches it at once; every
    /// other command waits its turn.
    pub fn handle_command(&mut self, cmd: Command) {
        if cmd == Command::Abor && self.transfers.in_transfer() {
            self.transfers.abort();
        } else {
            self.held.push_back(cmd);
        }
    }

    /// The next action for the driver, if one is due.
    ///
    /// Commands go to the login machine one at a time, each only once every action of the one
    /// before was taken: a setting that a later command changes (`PROT`, `MODE`, `REST`) is
    /// read for each command as it stood when the command came.
    pub fn poll_action(&mut self) -> Option<ServerAction> {
        loop {
            if let Some(a) = self.transfers.poll_action() {
                return Some(a);
            }
            if self.transfers.is_busy() {
                return None;
            }
            match self.login.poll_action() {
                Some(ServerAction::Forward(cmd)) if self.ours(&cmd) => {
                    self.transfers.set_prot_private(self.login.prot_private());
                    self.transfers.set_gsi(self.login.is_gsi());
                    self.transfers.handle_command(cmd);
                    continue;
                }
                Some(ServerAction::Close) => {
                    self.held.clear();
                    return Some(ServerAction::Close);
                }
                Some(other) => return Some(other),
                None => {}
            }
            if self.login.is_verifying() || self.login.is_closed() {
                return None;
            }
            let cmd = self.held.pop_front()?;
            self.login.handle_command(cmd);
        }
    }

    fn ours(&self, cmd: &Command) -> bool {
        let own = self.own_transfers
            && matches!(
                cmd,
                Command::Retr(_) | Command::Eret { .. } | Command::Stor(_)
            );
        is_data_command(cmd) && !own
    }
}
