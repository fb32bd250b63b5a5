//! A receiving PLUT socket's peer filter. PLUT's receiver answers the first address that sends
//! a valid datagram of its session, and the session id travels on the control channel: without a
//! filter, anyone who read it could be that address and have their bytes written. A classic BPF
//! program attached to the socket drops every datagram not from the control connection's peer
//! before it is queued.

use std::io;
use std::net::{IpAddr, UdpSocket};

/// A classic BPF program that passes the datagrams whose source address is `peer` and drops
/// the rest: loads at `SKF_NET_OFF` read the IP header of the datagram being queued.
fn source_filter(peer: IpAddr) -> Vec<libc::sock_filter> {
    let op = |code: u32, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf,
        k,
    };
    // (offset of a 32-bit word of the source address in the IP header, its value)
    let words: Vec<(u32, u32)> = match peer {
        IpAddr::V4(a) => vec![(12, u32::from_be_bytes(a.octets()))],
        IpAddr::V6(a) => a
            .segments()
            .chunks(2)
            .zip((8..).step_by(4))
            .map(|(w, off)| (off, (u32::from(w[0]) << 16) | u32::from(w[1])))
            .collect(),
    };
    let net = libc::SKF_NET_OFF as u32;
    let n = words.len();
    let mut prog = Vec::with_capacity(2 * n + 2);
    for (i, (off, value)) in words.into_iter().enumerate() {
        prog.push(op(
            libc::BPF_LD | libc::BPF_W | libc::BPF_ABS,
            0,
            net.wrapping_add(off),
        ));
        // A mismatch skips the later word pairs and the accept, to the drop.
        prog.push(op(
            libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
            (2 * (n - i - 1) + 1) as u8,
            value,
        ));
    }
    prog.push(op(libc::BPF_RET | libc::BPF_K, 0, u32::MAX));
    prog.push(op(libc::BPF_RET | libc::BPF_K, 0, 0));
    prog
}

/// Lets only datagrams from `peer` reach `sock`.
pub fn only_from(sock: &UdpSocket, peer: IpAddr) -> io::Result<()> {
    socket2::SockRef::from(sock).attach_filter(&source_filter(peer))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Datagrams from any address but the peer's are dropped before they are queued.
    #[test]
    fn the_source_filter_passes_only_the_peer() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        only_from(&sock, "127.0.0.1".parse().unwrap()).unwrap();
        let to = sock.local_addr().unwrap();
        UdpSocket::bind("127.0.0.2:0")
            .unwrap()
            .send_to(b"other", to)
            .unwrap();
        UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .send_to(b"peer", to)
            .unwrap();
        let mut buf = [0u8; 16];
        let (n, from) = sock.recv_from(&mut buf).unwrap();
        assert_eq!(
            (&buf[..n], from.ip()),
            (&b"peer"[..], "127.0.0.1".parse::<IpAddr>().unwrap())
        );
        let Ok(v6) = UdpSocket::bind("[::1]:0") else {
            return eprintln!("no IPv6 loopback: IPv6 filter not tested");
        };
        v6.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        only_from(&v6, "::1".parse().unwrap()).unwrap();
        UdpSocket::bind("[::1]:0")
            .unwrap()
            .send_to(b"v6", v6.local_addr().unwrap())
            .unwrap();
        let n = v6.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"v6");
    }
}
