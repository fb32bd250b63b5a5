//! One client session with one server: a control connection plus its MODE E data connections,
//! kept across files so that a tree of small files costs no connection set-up per file. As
//! GridFTP requires (GFD.020, and as Globus enforces), the sender opens data connections:
//! downloads listen and send PORT, uploads send PASV and connect.

use std::path::Path;
use std::time::Duration;

use haul_proto::command::TransferMode;
use haul_proto::{Command, RangeSet, Reply};
use haul_transport::io::{Sink, Source};
use haul_transport::mode_e::Progress;
use haul_transport::net::{DataListener, NetStack, RawConn};
use haul_transport::Conn;

use crate::checksum::{parse_cksm_reply, Algorithm};
use crate::control::Control;
use crate::error::XferError;
use crate::tls::ClientTls;
use crate::url::RemoteUrl;

mod data;
mod early;
mod get;
mod plut;
mod put;
mod relay;
mod spare;

pub use spare::{could_carry, Spare};

pub use data::PasvAddress;
pub use relay::Fetch;

/// How long a data channel may stay silent by default (`--data-timeout`): the read deadline
/// reused connections always had.
pub const DEFAULT_DATA_TIMEOUT: Duration = Duration::from_secs(120);

/// Data-channel settings of a session.
#[derive(Debug, Clone)]
pub struct DataParams {
    /// TCP streams per file.
    pub parallelism: u32,
    /// Socket buffer size (None: kernel autotuning).
    pub tcp_buffer: Option<usize>,
    /// MODE E block size.
    pub block: usize,
}

/// Which way the session's cached data connections point.
enum DataState {
    None,
    /// We listen; the server connects (downloads, and the destination side of nothing else).
    Download {
        listener: DataListener,
        /// Under GSI, the background acceptor of the listener's connections.
        early: Option<early::EarlyAccept>,
        parallelism: u32,
        cached: Vec<Conn>,
    },
    /// The server listens at `addr`; we connect (uploads).
    Upload {
        cached: Vec<Conn>,
        pending: Vec<RawConn>,
        /// Under GSI, connections whose handshakes run in the background, and how many.
        ahead: Option<(usize, Ahead)>,
    },
}

/// Upload connections being readied in the background.
type Ahead = std::thread::JoinHandle<std::io::Result<Vec<Conn>>>;

/// A logged-in session with its data-channel state.
pub struct Session {
    /// The control connection.
    pub ctl: Control,
    url: RemoteUrl,
    tls: Option<ClientTls>,
    mode_e: bool,
    data: DataState,
    data_timeout: Duration,
    pasv_address: PasvAddress,
    /// PLUT parameters once `OPTS HAUL Transport=plut` was accepted.
    plut: Option<haul_transport::plut::params::Params>,
    /// The rate PLUT's sender starts from, bytes/s, when history knows one for this path.
    plut_start: Option<u64>,
    /// Set when [`Session::get_many`] left a pipeline early: replies to commands already sent
    /// are still due, so the control connection can only be closed.
    abandoned: bool,
    /// The data-connection token (`DTOK`), once asked for.
    token: Option<haul_transport::token::DataToken>,
    /// What carries data connections (`SITE SETNETSTACK`).
    stack: NetStack,
}

/// One file to fetch in a pipelined batch.
pub struct GetItem<'a> {
    /// Remote path.
    pub path: String,
    /// Where the bytes go.
    pub sink: &'a dyn Sink,
    /// Expected length (bounds block offsets), if known.
    pub len: Option<u64>,
    /// Ranges already held (sent as REST).
    pub have: Option<RangeSet>,
    /// A partial read `(offset, length)` sent as ERET P instead of RETR; blocks land at 0-based
    /// offsets relative to `offset`, as Globus does.
    pub eret: Option<(u64, u64)>,
    /// Checksum to ask the server for after the RETR; the local file is hashed meanwhile.
    pub cksm: Option<(Algorithm, &'a Path)>,
    /// Live counters.
    pub progress: &'a Progress,
}

/// One file to store in a pipelined batch.
pub struct PutItem<'a> {
    /// Remote path.
    pub path: String,
    /// Where the bytes come from.
    pub src: &'a dyn Source,
    /// File length.
    pub len: u64,
    /// Ranges the server already holds (sent as REST; only the rest is sent).
    pub have: Option<RangeSet>,
    /// Checksum algorithm to ask the server for, after the STOR.
    pub cksm: Option<Algorithm>,
    /// Live counters.
    pub progress: &'a Progress,
}

/// What the server reported for one file.
#[derive(Debug, Default, Clone)]
pub struct ItemResult {
    /// The server's checksum, when asked.
    pub server_cksm: Option<String>,
    /// Our checksum of the downloaded file, computed while the server computed its own.
    pub local_cksm: Option<String>,
    /// For XXHC hashed on the way in, the chunk digests behind `local_cksm`.
    pub local_chunks: Option<crate::checksum::chunked::ChunkList>,
    /// Ranges the server reported written (111 markers), uploads only.
    pub markers: RangeSet,
}

/// The item a [`haul_proto::client::FileEvent`] names: items are pushed in order, so file `i`
/// is `items[i]`.
fn item_at<T>(items: &[T], file: usize) -> Result<&T, XferError> {
    items
        .get(file)
        .ok_or_else(|| XferError::Internal(format!("an event for file {file} of {}", items.len())))
}

/// The `CKSM` command for the whole of `path`.
fn cksm_of(alg: Algorithm, path: &str) -> Command {
    Command::Cksm {
        algorithm: alg.name().into(),
        offset: 0,
        length: None,
        path: path.to_string(),
    }
}

impl Session {
    /// Connects and logs in; data connections after `PASV` go where `pasv` says.
    pub fn open(
        url: &RemoteUrl,
        tls: Option<&ClientTls>,
        pasv: PasvAddress,
    ) -> Result<Session, XferError> {
        let ctl = Control::connect(url, tls, Duration::from_secs(30))?;
        let mut s = Self::with_control(ctl, url, tls, pasv);
        s.adopt_end_features()?;
        Ok(s)
    }

    /// As [`Session::open`], for one `SITE <site>` question (`BTC`, `BTC ALL`): a haul server
    /// gets it with the login, so its answer costs no round trip of its own.
    pub fn open_asking(
        url: &RemoteUrl,
        tls: Option<&ClientTls>,
        pasv: PasvAddress,
        site: &str,
    ) -> Result<Session, XferError> {
        if haul_proto::nested::is_nested(&url.path) {
            return Self::open(url, tls, pasv);
        }
        let ahead = Command::Site(site.into());
        let ctl = Control::connect_asking(url, tls, Duration::from_secs(30), ahead)?;
        Ok(Self::with_control(ctl, url, tls, pasv))
    }

    /// Carries `url`'s transfers from now on: a session logged in to a relay with no chain of
    /// its own takes the features of the end of `url`'s chain (`SITE RELAY FEAT`), as a
    /// session opened for `url` would have.
    pub(crate) fn retarget(&mut self, url: &RemoteUrl) -> Result<(), XferError> {
        self.url = url.clone();
        self.adopt_end_features()
    }

    /// Where data connections after `PASV` go from now on.
    pub fn set_pasv_address(&mut self, pasv: PasvAddress) {
        self.pasv_address = pasv;
    }

    /// For a path through relays, takes what the server at the end of the chain offers
    /// (`SITE RELAY FEAT`): its checksum algorithms decide verification, since `CKSM` passes
    /// through every relay to it. PLUT is not relayed.
    fn adopt_end_features(&mut self) -> Result<(), XferError> {
        if !haul_proto::nested::is_nested(&self.url.path) || !self.ctl.features.relay {
            return Ok(());
        }
        let cmd = Command::Site(format!("RELAY FEAT {}", self.url.path));
        self.ctl.send(&cmd)?;
        let r = self.ctl.final_reply(&mut |_| {})?;
        if r.code != 211 {
            return Err(XferError::from_reply(&self.ctl.name, &cmd, &r));
        }
        let end = haul_proto::Features::parse(&r);
        self.ctl.features.cksm = end.cksm;
        self.ctl.features.plut = false;
        Ok(())
    }

    /// Connects to one of `addrs` (resolved and checked by the caller) and logs in.
    pub fn open_at(
        url: &RemoteUrl,
        addrs: &[std::net::SocketAddr],
        tls: Option<&ClientTls>,
        pasv: PasvAddress,
    ) -> Result<Session, XferError> {
        let ctl = Control::connect_to(url, addrs, tls, Duration::from_secs(30))?;
        Ok(Self::with_control(ctl, url, tls, pasv))
    }

    fn with_control(
        ctl: Control,
        url: &RemoteUrl,
        tls: Option<&ClientTls>,
        pasv: PasvAddress,
    ) -> Session {
        Session {
            ctl,
            url: url.clone(),
            tls: tls.and_then(|t| t.for_url(url)),
            mode_e: false,
            data: DataState::None,
            data_timeout: DEFAULT_DATA_TIMEOUT,
            pasv_address: pasv,
            plut: None,
            plut_start: None,
            abandoned: false,
            token: None,
            stack: NetStack::Tcp,
        }
    }

    /// Carries this session's data connections over `stack` from now on: `SITE SETNETSTACK`,
    /// which Globus servers with the UDT driver and haul servers understand. A server that
    /// refuses it cannot move data this way, and the error says so.
    pub fn set_net_stack(&mut self, stack: NetStack) -> Result<(), XferError> {
        if stack == self.stack {
            return Ok(());
        }
        if stack == NetStack::Udt && self.tls.is_some() {
            return Err(XferError::Usage(
                "UDT data channels carry no TLS; use --transport tcp with TLS".into(),
            ));
        }
        let cmd = Command::Site(format!("SETNETSTACK {stack}"));
        self.ctl.send(&cmd)?;
        let r = self.ctl.final_reply(&mut |_| {})?;
        if !r.is_success() {
            return Err(XferError::Unsupported {
                host: self.ctl.name.clone(),
                what: format!("{stack} data channels"),
                reply: r.to_string(),
            });
        }
        self.stack = stack;
        self.data = DataState::None;
        Ok(())
    }

    /// Sets how long a data channel may stay silent: connecting, waiting for the server's
    /// connection, or between bytes (default [`DEFAULT_DATA_TIMEOUT`]).
    pub fn set_data_timeout(&mut self, t: Duration) {
        self.data_timeout = t;
    }

    /// Fails once [`Session::get_many`] has left a pipeline early: replies to commands already
    /// sent are still due, so no new command's reply could be told apart from them.
    fn usable(&self) -> Result<(), XferError> {
        if self.abandoned {
            return Err(XferError::Usage(
                "session left a pipeline early; it cannot be reused".into(),
            ));
        }
        Ok(())
    }

    /// The server's `211` reply to the login's `FEAT` (after any relay's end features were
    /// adopted, still the first server's own reply).
    pub fn feat_reply(&self) -> Option<&Reply> {
        self.ctl.feat_reply.as_ref()
    }

    /// The URL this session was opened for.
    pub fn url(&self) -> &RemoteUrl {
        &self.url
    }

    pub(crate) fn set_mode_e(&mut self) -> Result<(), XferError> {
        if !self.mode_e {
            self.ctl
                .expect(&Command::Mode(TransferMode::Extended), 200)?;
            self.mode_e = true;
        }
        Ok(())
    }

    /// Remote file size (SIZE).
    pub fn size(&mut self, path: &str) -> Result<u64, XferError> {
        let r = self.ctl.expect(&Command::Size(path.to_string()), 213)?;
        r.text().trim().parse().map_err(|_| XferError::Protocol {
            host: self.ctl.name.clone(),
            reply: r.to_string(),
        })
    }

    /// Remote checksum (CKSM alg 0 -1 path).
    pub fn cksm(&mut self, alg: Algorithm, path: &str) -> Result<String, XferError> {
        self.usable()?;
        let cmd = cksm_of(alg, path);
        let r = self.ctl.expect(&cmd, 213)?;
        parse_cksm_reply(&r).ok_or_else(|| XferError::Protocol {
            host: self.ctl.name.clone(),
            reply: r.to_string(),
        })
    }

    /// The server's XXHC digests of the chunks of `path` from the one holding `offset`, at
    /// most [`chunked::MAX_LIST`](crate::checksum::chunked::MAX_LIST) of them.
    pub fn cksm_list(
        &mut self,
        path: &str,
        offset: u64,
    ) -> Result<crate::checksum::chunked::ListWindow, XferError> {
        self.usable()?;
        let cmd = Command::Cksm {
            algorithm: crate::checksum::chunked::LIST.into(),
            offset,
            length: None,
            path: path.to_string(),
        };
        let r = self.ctl.expect(&cmd, 213)?;
        crate::checksum::chunked::ListWindow::parse(&r.lines).map_err(|e| XferError::Protocol {
            host: self.ctl.name.clone(),
            reply: e.to_string(),
        })
    }

    /// Makes a directory; an existing one is fine.
    pub fn mkdir(&mut self, path: &str) -> Result<(), XferError> {
        let cmd = Command::Mkd(path.to_string());
        self.ctl.send(&cmd)?;
        let r = self.ctl.final_reply(&mut |_| {})?;
        if r.is_success() || r.text().to_ascii_lowercase().contains("exist") {
            return Ok(());
        }
        Err(XferError::from_reply(&self.ctl.name, &cmd, &r))
    }

    /// MLST facts of one path: (is_dir, size).
    pub fn stat(&mut self, path: &str) -> Result<(bool, u64), XferError> {
        let r = self
            .ctl
            .expect(&Command::Mlst(Some(path.to_string())), 250)?;
        let facts = r
            .lines
            .iter()
            .find(|l| l.contains('=') && l.contains(';'))
            .cloned()
            .unwrap_or_default();
        crate::listing::parse_mlst(&facts).ok_or_else(|| XferError::Protocol {
            host: self.ctl.name.clone(),
            reply: r.to_string(),
        })
    }

    /// Lists a directory with MLSD in stream mode over a passive connection.
    pub fn mlsd(&mut self, path: &str) -> Result<Vec<crate::listing::Entry>, XferError> {
        let bytes = self.listing(&Command::Mlsd(Some(path.to_string())))?;
        Ok(crate::listing::parse_mlsd(&bytes))
    }

    /// Reads the reply to a queued `CKSM` and returns its digest.
    fn cksm_reply(&mut self, alg: Algorithm, path: &str) -> Result<Option<String>, XferError> {
        let r = self.ctl.final_reply(&mut |_| {})?;
        if r.code != 213 {
            return Err(XferError::from_reply(
                &self.ctl.name,
                &cksm_of(alg, path),
                &r,
            ));
        }
        Ok(parse_cksm_reply(&r))
    }

    /// Ends the session politely (or, after [`Session::get_many`] left early, just closes it).
    pub fn quit(mut self) {
        if self.abandoned {
            return;
        }
        // The 221 carries nothing a client needs, and waiting for it would add a round trip
        // to the end of every copy; the server ends the session on QUIT or on the close.
        let _ = self.ctl.send(&Command::Quit);
    }

    /// PLUT flows of this session start at `bytes_per_s` (from the path's history) rather than
    /// at B/16, where the server takes a starting rate; set before the first PLUT transfer.
    pub fn set_plut_start(&mut self, bytes_per_s: Option<u64>) {
        self.plut_start = bytes_per_s;
    }

    /// True when the session can carry further commands (no pipeline was left with replies
    /// still due).
    pub fn reusable(&self) -> bool {
        !self.abandoned
    }
}
