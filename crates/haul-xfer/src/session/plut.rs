//! PLUT data channels for a client session (docs/protocol.md, "PLUT data channels"): the
//! session is switched once with `OPTS HAUL Transport=plut;Mds=N;Rate=B;`, then every file is
//! its own UDP flow with a fresh random session id — downloads bind a socket and announce it
//! with `PLUT PORT`, uploads ask the server for one with `PLUT PASV`. Files go one after
//! another (no pipelining of RETR/STOR over PLUT); `CKSM` still rides behind each transfer.
//! PLUT moves whole files (or an ERET range): restart ranges are not used.

use std::net::{IpAddr, SocketAddr, UdpSocket};

use haul_proto::{hostport, Command};
use haul_transport::plut::{self, params, Tuning};

use super::{cksm_of, parse_cksm, retr_of, GetItem, ItemResult, PutItem, Session};
use crate::error::XferError;

/// File data each PLUT end buffers, bytes.
const BUFFER_BYTES: usize = 96 << 20;

fn plut_cmd(arg: String) -> Command {
    Command::Unknown { verb: "PLUT".into(), arg }
}

fn plut_err(what: &str, e: plut::PlutError) -> XferError {
    XferError::io(what, std::io::Error::other(e.to_string()))
}

/// A classic BPF program that passes the datagrams whose source address is `peer` and drops
/// the rest: loads at `SKF_NET_OFF` read the IP header of the datagram being queued.
fn source_filter(peer: IpAddr) -> Vec<libc::sock_filter> {
    let op = |code: u32, jf: u8, k: u32| libc::sock_filter { code: code as u16, jt: 0, jf, k };
    // (offset of a 32-bit word of the source address in the IP header, its value)
    let words: Vec<(u32, u32)> = match peer {
        IpAddr::V4(a) => vec![(12, u32::from_be_bytes(a.octets()))],
        IpAddr::V6(a) => a.segments().chunks(2).zip((8..).step_by(4)).map(|(w, off)| (off, (u32::from(w[0]) << 16) | u32::from(w[1]))).collect(),
    };
    let net = libc::SKF_NET_OFF as u32;
    let n = words.len();
    let mut prog = Vec::with_capacity(2 * n + 2);
    for (i, (off, value)) in words.into_iter().enumerate() {
        prog.push(op(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, net.wrapping_add(off)));
        // A mismatch skips the later word pairs and the accept, to the drop.
        prog.push(op(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, (2 * (n - i - 1) + 1) as u8, value));
    }
    prog.push(op(libc::BPF_RET | libc::BPF_K, 0, u32::MAX));
    prog.push(op(libc::BPF_RET | libc::BPF_K, 0, 0));
    prog
}

/// Lets only datagrams from `peer` reach `sock`. PLUT's receiver answers the first address that
/// sends a valid datagram of its session, and the session id travels on the control channel:
/// without this anyone who read it could be that address and have their bytes written.
fn only_from(sock: &UdpSocket, peer: IpAddr) -> Result<(), XferError> {
    socket2::SockRef::from(sock).attach_filter(&source_filter(peer)).map_err(|e| XferError::io("PLUT socket filter", e))
}

impl Session {
    /// Selects PLUT for this session's transfers, with datagrams sized to the path MTU and the
    /// sender's NIC rate `rate` (bytes/s; default 10 Gb/s).
    fn ready_plut(&mut self, rate: Option<u64>) -> Result<params::Params, XferError> {
        if let Some(p) = self.plut {
            return Ok(p);
        }
        if !self.ctl.features.plut {
            return Err(XferError::Usage(format!("{} does not offer PLUT (no `PLUT 1` in FEAT); use --transport tcp", self.ctl.name)));
        }
        let mds = plut::path_mds(self.ctl.peer.ip()).unwrap_or(plut::DEFAULT_MDS);
        let p = params::Params { mds, rate: rate.map_or(params::DEFAULT_RATE, |r| r as f64) };
        self.ctl.ok(&Command::Opts { command: "HAUL".into(), options: params::format_opts(&p) })?;
        self.plut = Some(p);
        Ok(p)
    }

    /// Downloads `items` one at a time over PLUT.
    pub fn get_plut(&mut self, items: &[GetItem<'_>], rate: Option<u64>) -> Result<Vec<ItemResult>, XferError> {
        let p = self.ready_plut(rate)?;
        let tuning = Tuning { idle_timeout: self.data_timeout, ..Tuning::default() };
        let mut results = Vec::with_capacity(items.len());
        for item in items {
            let len = match (item.eret, item.len) {
                (Some((_, l)), _) | (None, Some(l)) => l,
                (None, None) => return Err(XferError::Usage(format!("{}: PLUT needs the file's length", item.path))),
            };
            let session: u64 = rand::random();
            let sock = plut::bind(SocketAddr::new(self.ctl.local.ip(), 0), &tuning).map_err(|e| XferError::io("PLUT socket", e))?;
            only_from(&sock, self.ctl.peer.ip())?;
            let addr = sock.local_addr().map_err(|e| XferError::io("PLUT socket", e))?;
            self.ctl.ok(&plut_cmd(format!("PORT {} {session:016x}", hostport::format_port(&addr))))?;
            let retr = retr_of(item);
            self.ctl.send(&retr)?;
            if let Some((alg, _)) = item.cksm {
                self.ctl.send(&cksm_of(alg, &item.path))?;
            }
            let r = self.ctl.final_reply(&mut |_| {})?;
            if !r.is_preliminary() {
                return Err(XferError::from_reply(&self.ctl.name, &retr, &r));
            }
            let cfg = plut::config(session, p.mds, p.rate, BUFFER_BYTES);
            // Hash our copy as its prefix grows, as over TCP.
            let finished = std::sync::atomic::AtomicBool::new(false);
            let prefix = || item.progress.ranges.lock().ok().and_then(|r| r.ranges().first().filter(|r| r.0 == 0).map(|r| r.1)).unwrap_or(0);
            let (prefix, finished) = (&prefix, &finished);
            let (got, mine) = std::thread::scope(|s| {
                let follower = item.cksm.map(|(alg, local)| s.spawn(move || crate::checksum::follow(local, alg, prefix, finished)));
                let got = plut::receive(&sock, item.sink, 0, len, &cfg, &tuning, item.progress);
                finished.store(true, std::sync::atomic::Ordering::Release);
                (got, follower.map(|h| h.join()))
            });
            let stats = got.map_err(|e| plut_err(&format!("receiving {}", item.path), e))?;
            tracing::debug!(path = %item.path, ?stats, "PLUT receive done");
            let r = self.ctl.final_reply(&mut |_| {})?;
            if !r.is_success() {
                return Err(XferError::from_reply(&self.ctl.name, &retr, &r));
            }
            let mut res = ItemResult::default();
            if let (Some((alg, _)), Some(mine)) = (item.cksm, mine) {
                let r = self.ctl.final_reply(&mut |_| {})?;
                if r.code != 213 {
                    return Err(XferError::from_reply(&self.ctl.name, &cksm_of(alg, &item.path), &r));
                }
                res.server_cksm = parse_cksm(&r);
                res.local_cksm = Some(mine.unwrap_or_else(|_| Err(XferError::Usage("checksum thread panicked".into())))?);
            }
            results.push(res);
        }
        Ok(results)
    }

    /// Uploads `items` one at a time over PLUT.
    pub fn put_plut(&mut self, items: &[PutItem<'_>], rate: Option<u64>) -> Result<Vec<ItemResult>, XferError> {
        let p = self.ready_plut(rate)?;
        let tuning = Tuning { idle_timeout: self.data_timeout, ..Tuning::default() };
        let mut results = Vec::with_capacity(items.len());
        for item in items {
            let session: u64 = rand::random();
            let r = self.ctl.expect(&plut_cmd(format!("PASV {session:016x} {}", item.len)), 227)?;
            let offered = hostport::find_in_reply(&r.text()).ok_or_else(|| XferError::Protocol { host: self.ctl.name.clone(), reply: r.to_string() })?;
            let peer = self.data_addr(offered);
            let stor = Command::Stor(item.path.clone());
            self.ctl.send(&stor)?;
            if let Some(alg) = item.cksm {
                self.ctl.send(&cksm_of(alg, &item.path))?;
            }
            let r = self.ctl.final_reply(&mut |_| {})?;
            if !r.is_preliminary() {
                return Err(XferError::from_reply(&self.ctl.name, &stor, &r));
            }
            let sock = plut::bind(SocketAddr::new(self.ctl.local.ip(), 0), &tuning).map_err(|e| XferError::io("PLUT socket", e))?;
            let cfg = plut::config(session, p.mds, p.rate, BUFFER_BYTES);
            let ctl = &mut self.ctl;
            let (reply, sent) = std::thread::scope(|s| {
                let h = s.spawn(|| plut::send(&sock, peer, item.src, 0, item.len, &cfg, &tuning, item.progress));
                (ctl.final_reply(&mut |_| {}), h.join())
            });
            let r = reply?;
            let stats = sent
                .unwrap_or_else(|_| Err(plut::PlutError::Io { what: "sending", source: std::io::Error::other("sender thread panicked") }))
                .map_err(|e| plut_err(&format!("sending {}", item.path), e))?;
            tracing::debug!(path = %item.path, ?stats, "PLUT send done");
            if !r.is_success() {
                return Err(XferError::from_reply(&self.ctl.name, &stor, &r));
            }
            let mut res = ItemResult { markers: item.progress.ranges(), ..ItemResult::default() };
            if let Some(alg) = item.cksm {
                res.server_cksm = self.cksm_reply(alg, &item.path)?;
            }
            results.push(res);
        }
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Datagrams from any address but the peer's are dropped before they are queued.
    #[test]
    fn the_source_filter_passes_only_the_peer() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        only_from(&sock, "127.0.0.1".parse().unwrap()).unwrap();
        let to = sock.local_addr().unwrap();
        UdpSocket::bind("127.0.0.2:0").unwrap().send_to(b"other", to).unwrap();
        UdpSocket::bind("127.0.0.1:0").unwrap().send_to(b"peer", to).unwrap();
        let mut buf = [0u8; 16];
        let (n, from) = sock.recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..n], from.ip()), (&b"peer"[..], "127.0.0.1".parse::<IpAddr>().unwrap()));
        let Ok(v6) = UdpSocket::bind("[::1]:0") else { return eprintln!("no IPv6 loopback: IPv6 filter not tested") };
        v6.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        only_from(&v6, "::1".parse().unwrap()).unwrap();
        UdpSocket::bind("[::1]:0").unwrap().send_to(b"v6", v6.local_addr().unwrap()).unwrap();
        let n = v6.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"v6");
    }
}
