//! Client and server state machines of the TPG control flow (001 §III-A, steps 1–13). They
//! consume decoded bytes and driver calls and produce bytes to send plus events for the driver;
//! no sockets inside. Any unexpected message moves the machine to `Failed` and queues ERROR.

use super::{Decoder, Hello, Msg, SideReport, VERSION};
use crate::params::ProfileParams;
use crate::{ProfileError, Result};

/// Bytes in and out, shared by both machines.
#[derive(Debug, Default)]
struct Link {
    decoder: Decoder,
    out: Vec<u8>,
}

impl Link {
    fn send(&mut self, m: &Msg) {
        m.encode(&mut self.out);
    }

    fn next(&mut self, bytes: &[u8]) -> Result<Option<Msg>> {
        self.decoder.feed(bytes);
        self.decoder
            .next_msg()
            .map_err(|e| ProfileError::Protocol(e.to_string()))
    }
}

fn check_version(h: &Hello) -> Result<()> {
    if h.version == VERSION {
        Ok(())
    } else {
        Err(ProfileError::Protocol(format!(
            "peer {} speaks control protocol version {}, this side speaks {VERSION}",
            h.software, h.version
        )))
    }
}

/// Where the client is in the control flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientState {
    /// Waiting for CTRL_CHAN_EST (step 3).
    AwaitEst,
    /// HANDSHAKE sent (step 4).
    AwaitHandshake,
    /// PARAMS sent (step 6).
    AwaitParams,
    /// CREATE_STREAMS sent (step 7).
    AwaitStreams,
    /// The driver connects the data channels (step 9).
    Connecting,
    /// PROFILING_START sent (step 10).
    AwaitStart,
    /// Blocks are flowing (step 11).
    Running,
    /// PROFILING_END sent (step 12).
    AwaitEnd,
    /// END acknowledged; the driver sends its results.
    Ended,
    /// EXCHANGE_PROFILE sent (step 13).
    AwaitExchange,
    /// TPG_DONE sent (step 13).
    AwaitDone,
    /// The run completed.
    Finished,
    /// An error ended the run.
    Failed,
}

/// What the client driver must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// Connect one data channel per port, then call [`Client::streams_connected`].
    ConnectStreams {
        /// θ as accepted by the server.
        params: Box<ProfileParams>,
        /// Server data ports, one per stream.
        ports: Vec<u16>,
    },
    /// Start sending blocks; call [`Client::transfer_done`] when every sender stops.
    StartTransfer,
    /// END was acknowledged; call [`Client::send_results`].
    TransferEnded,
    /// The server's results; the run is over.
    Finished(SideReport),
}

/// The client (sender) side of the control channel.
#[derive(Debug)]
pub struct Client {
    state: ClientState,
    params: ProfileParams,
    link: Link,
    server_report: Option<SideReport>,
}

impl Client {
    /// A client that will propose `params`.
    pub fn new(params: ProfileParams) -> Client {
        Client {
            state: ClientState::AwaitEst,
            params,
            link: Link::default(),
            server_report: None,
        }
    }

    /// The current state.
    pub fn state(&self) -> ClientState {
        self.state
    }

    /// Takes the bytes queued for the server.
    pub fn transmit(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.link.out)
    }

    /// Feeds bytes from the server; returns the events of every complete message.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<ClientEvent>> {
        let mut events = Vec::new();
        let mut input = bytes;
        loop {
            let m = match self.link.next(input) {
                Ok(Some(m)) => m,
                Ok(None) => return Ok(events),
                Err(e) => return Err(self.fail_with(e)),
            };
            input = &[];
            if let Some(e) = self.handle(m)? {
                events.push(e);
            }
        }
    }

    /// Handles one message from the server.
    pub fn handle(&mut self, m: Msg) -> Result<Option<ClientEvent>> {
        use ClientState as S;
        let ev = match (self.state, m) {
            (S::Failed, _) => {
                return Err(ProfileError::Protocol(
                    "control channel already failed".into(),
                ))
            }
            (_, Msg::Error(reason)) => {
                self.state = S::Failed;
                return Err(ProfileError::Remote(reason));
            }
            (S::AwaitEst, Msg::CtrlChanEst) => {
                self.link.send(&Msg::Handshake(Hello::ours()));
                self.state = S::AwaitHandshake;
                None
            }
            (S::AwaitHandshake, Msg::Handshake(h)) => {
                check_version(&h).map_err(|e| self.fail_with(e))?;
                self.link.send(&Msg::Params(Box::new(self.params.clone())));
                self.state = S::AwaitParams;
                None
            }
            (S::AwaitParams, Msg::Params(p)) => {
                self.params = *p;
                self.link.send(&Msg::CreateStreams(Vec::new()));
                self.state = S::AwaitStreams;
                None
            }
            (S::AwaitStreams, Msg::CreateStreams(ports)) => {
                if ports.len() != self.params.streams as usize {
                    let e = ProfileError::Protocol(format!(
                        "server opened {} data ports for {} streams",
                        ports.len(),
                        self.params.streams
                    ));
                    return Err(self.fail_with(e));
                }
                self.state = S::Connecting;
                Some(ClientEvent::ConnectStreams {
                    params: Box::new(self.params.clone()),
                    ports,
                })
            }
            (S::AwaitStart, Msg::Start) => {
                self.state = S::Running;
                Some(ClientEvent::StartTransfer)
            }
            (S::AwaitEnd, Msg::End) => {
                self.state = S::Ended;
                Some(ClientEvent::TransferEnded)
            }
            (S::AwaitExchange, Msg::Exchange(r)) => {
                self.server_report = Some(r);
                self.link.send(&Msg::Done);
                self.state = S::AwaitDone;
                None
            }
            (S::AwaitDone, Msg::Done) => {
                self.state = S::Finished;
                Some(ClientEvent::Finished(
                    self.server_report.take().unwrap_or_default(),
                ))
            }
            (s, m) => {
                let e = ProfileError::Protocol(format!(
                    "unexpected {} from the server in state {s:?}",
                    m.name()
                ));
                return Err(self.fail_with(e));
            }
        };
        Ok(ev)
    }

    fn step(&mut self, from: ClientState, to: ClientState, msg: Msg) -> Result<()> {
        if self.state != from {
            return Err(ProfileError::Protocol(format!(
                "client cannot send {} in state {:?}",
                msg.name(),
                self.state
            )));
        }
        self.link.send(&msg);
        self.state = to;
        Ok(())
    }

    /// Every data channel is connected: sends PROFILING_START.
    pub fn streams_connected(&mut self) -> Result<()> {
        self.step(ClientState::Connecting, ClientState::AwaitStart, Msg::Start)
    }

    /// Every sender stopped: sends PROFILING_END.
    pub fn transfer_done(&mut self) -> Result<()> {
        self.step(ClientState::Running, ClientState::AwaitEnd, Msg::End)
    }

    /// Sends the sender-side results (EXCHANGE_PROFILE).
    pub fn send_results(&mut self, r: SideReport) -> Result<()> {
        self.step(
            ClientState::Ended,
            ClientState::AwaitExchange,
            Msg::Exchange(r),
        )
    }

    /// Queues ERROR with `reason` and fails the machine.
    pub fn fail(&mut self, reason: &str) {
        if self.state != ClientState::Failed {
            self.link.send(&Msg::Error(reason.to_string()));
            self.state = ClientState::Failed;
        }
    }

    fn fail_with(&mut self, e: ProfileError) -> ProfileError {
        self.fail(&e.to_string());
        e
    }
}

/// Where the server is in the control flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// CTRL_CHAN_EST sent (step 3).
    AwaitHandshake,
    /// HANDSHAKE acknowledged (step 5).
    AwaitParams,
    /// The driver checks θ and initialises the transport.
    Configuring,
    /// PARAMS acknowledged (step 6).
    AwaitCreate,
    /// The driver listens on the data channels (step 8).
    Listening,
    /// Ports sent; waiting for PROFILING_START.
    AwaitStart,
    /// The driver accepts every data channel (step 9).
    Accepting,
    /// START acknowledged; blocks flowing (step 11).
    Running,
    /// END received; the driver drains the receivers (step 12).
    Ending,
    /// END acknowledged.
    AwaitExchange,
    /// The driver sends its results (step 13).
    Exchanging,
    /// Results sent; waiting for TPG_DONE.
    AwaitDone,
    /// TPG_DONE acknowledged; the server resets.
    Finished,
    /// An error ended the run.
    Failed,
}

/// What the server driver must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvent {
    /// Check θ and initialise the transport, then [`Server::params_accepted`].
    Configure(Box<ProfileParams>),
    /// Listen on one data channel per stream, then [`Server::listening`].
    CreateStreams,
    /// Accept every data channel and start receiving, then [`Server::started`].
    Start,
    /// The sender stopped: drain the receivers, then [`Server::ended`].
    End,
    /// The client's results; reply with [`Server::results`].
    Exchange(SideReport),
    /// The run is over.
    Finished,
}

/// The server (receiver) side of the control channel.
#[derive(Debug)]
pub struct Server {
    state: ServerState,
    link: Link,
}

impl Default for Server {
    fn default() -> Self {
        Server::new()
    }
}

impl Server {
    /// A server for a freshly accepted control connection: queues CTRL_CHAN_EST.
    pub fn new() -> Server {
        let mut link = Link::default();
        link.send(&Msg::CtrlChanEst);
        Server {
            state: ServerState::AwaitHandshake,
            link,
        }
    }

    /// The current state.
    pub fn state(&self) -> ServerState {
        self.state
    }

    /// Takes the bytes queued for the client.
    pub fn transmit(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.link.out)
    }

    /// Feeds bytes from the client; returns the events of every complete message.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<ServerEvent>> {
        let mut events = Vec::new();
        let mut input = bytes;
        loop {
            let m = match self.link.next(input) {
                Ok(Some(m)) => m,
                Ok(None) => return Ok(events),
                Err(e) => return Err(self.fail_with(e)),
            };
            input = &[];
            if let Some(e) = self.handle(m)? {
                events.push(e);
            }
        }
    }

    /// Handles one message from the client.
    pub fn handle(&mut self, m: Msg) -> Result<Option<ServerEvent>> {
        use ServerState as S;
        let ev = match (self.state, m) {
            (S::Failed, _) => {
                return Err(ProfileError::Protocol(
                    "control channel already failed".into(),
                ))
            }
            (_, Msg::Error(reason)) => {
                self.state = S::Failed;
                return Err(ProfileError::Remote(reason));
            }
            (S::AwaitHandshake, Msg::Handshake(h)) => {
                check_version(&h).map_err(|e| self.fail_with(e))?;
                self.link.send(&Msg::Handshake(Hello::ours()));
                self.state = S::AwaitParams;
                None
            }
            (S::AwaitParams, Msg::Params(p)) => {
                self.state = S::Configuring;
                Some(ServerEvent::Configure(p))
            }
            (S::AwaitCreate, Msg::CreateStreams(ports)) if ports.is_empty() => {
                self.state = S::Listening;
                Some(ServerEvent::CreateStreams)
            }
            (S::AwaitStart, Msg::Start) => {
                self.state = S::Accepting;
                Some(ServerEvent::Start)
            }
            (S::Running, Msg::End) => {
                self.state = S::Ending;
                Some(ServerEvent::End)
            }
            (S::AwaitExchange, Msg::Exchange(r)) => {
                self.state = S::Exchanging;
                Some(ServerEvent::Exchange(r))
            }
            (S::AwaitDone, Msg::Done) => {
                self.link.send(&Msg::Done);
                self.state = S::Finished;
                Some(ServerEvent::Finished)
            }
            (s, m) => {
                let e = ProfileError::Protocol(format!(
                    "unexpected {} from the client in state {s:?}",
                    m.name()
                ));
                return Err(self.fail_with(e));
            }
        };
        Ok(ev)
    }

    fn step(&mut self, from: ServerState, to: ServerState, msg: Msg) -> Result<()> {
        if self.state != from {
            return Err(ProfileError::Protocol(format!(
                "server cannot send {} in state {:?}",
                msg.name(),
                self.state
            )));
        }
        self.link.send(&msg);
        self.state = to;
        Ok(())
    }

    /// θ is acceptable (possibly adjusted): sends PARAMS back.
    pub fn params_accepted(&mut self, p: ProfileParams) -> Result<()> {
        self.step(
            ServerState::Configuring,
            ServerState::AwaitCreate,
            Msg::Params(Box::new(p)),
        )
    }

    /// The data channels listen on `ports`: acknowledges CREATE_STREAMS.
    pub fn listening(&mut self, ports: Vec<u16>) -> Result<()> {
        self.step(
            ServerState::Listening,
            ServerState::AwaitStart,
            Msg::CreateStreams(ports),
        )
    }

    /// Every data channel is accepted: acknowledges PROFILING_START.
    pub fn started(&mut self) -> Result<()> {
        self.step(ServerState::Accepting, ServerState::Running, Msg::Start)
    }

    /// Every receiver finished: acknowledges PROFILING_END.
    pub fn ended(&mut self) -> Result<()> {
        self.step(ServerState::Ending, ServerState::AwaitExchange, Msg::End)
    }

    /// Sends the receiver-side results.
    pub fn results(&mut self, r: SideReport) -> Result<()> {
        self.step(
            ServerState::Exchanging,
            ServerState::AwaitDone,
            Msg::Exchange(r),
        )
    }

    /// Queues ERROR with `reason` and fails the machine.
    pub fn fail(&mut self, reason: &str) {
        if self.state != ServerState::Failed {
            self.link.send(&Msg::Error(reason.to_string()));
            self.state = ServerState::Failed;
        }
    }

    fn fail_with(&mut self, e: ProfileError) -> ProfileError {
        self.fail(&e.to_string());
        e
    }
}
