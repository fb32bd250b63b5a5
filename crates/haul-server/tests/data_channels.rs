//! Data-channel peers and bounded data phases (issue 21, findings 3, 4, 5, 6 and 9): no bounce,
//! no stolen or injected data connections, transfers that end when their client leaves or their
//! data stops, and limits on streams, connections, fragmentation and checksum work.
//!
//! The whole of 127.0.0.0/8 is loopback: the client talks from 127.0.0.1 and the "other host"
//! (a victim, a thief) is 127.0.0.2.
mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use common::*;
use haul_proto::hostport::format_port;
use haul_proto::mode_e::Header;

const OTHER: [u8; 4] = [127, 0, 0, 2];

/// A TCP connection to `to` made from 127.0.0.2.
fn connect_from_other(to: SocketAddr) -> TcpStream {
    connect_from(OTHER, to)
}

/// A users file granting `line`'s permissions to user `u` / password `pw`.
fn users_file(dir: &std::path::Path, perms: &str) -> std::path::PathBuf {
    let p = dir.join("users");
    let h = haul_server::hash_password("pw").unwrap();
    fs::write(&p, format!("u:{h}:{perms}\n")).unwrap();
    p
}

#[test]
fn port_eprt_and_spor_may_name_only_the_client() {
    let root = tempfile::tempdir().unwrap();
    let victim = TcpListener::bind(SocketAddr::from((OTHER, 0))).unwrap();
    let v = victim.local_addr().unwrap();
    let srv = server(root.path(), |c| c.anonymous_write = false);
    let mut c = Ctl::anon(srv.addr());
    for cmd in [
        format!("PORT {}", format_port(&v)),
        format!("EPRT |1|127.0.0.2|{}|", v.port()),
        format!(
            "SPOR {} {}",
            format_port(&SocketAddr::from(([127, 0, 0, 1], 40000))),
            format_port(&v)
        ),
        "PORT 127,0,0,1,0,25".to_string(),
    ] {
        let r = c.cmd(&cmd);
        assert_eq!(r.code, 501, "{cmd}: {r}");
    }
    victim.set_nonblocking(true).unwrap();
    assert!(victim.accept().is_err(), "the victim was never contacted");
    // No data set-up survived the refusals.
    assert_eq!(c.cmd("RETR x").code, 550);
    assert_eq!(c.cmd("LIST").code, 425);
}

#[test]
fn a_third_party_user_may_name_another_host() {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("f"), b"third-party data").unwrap();
    let users = users_file(root.path(), "ro,third-party");
    let other = TcpListener::bind(SocketAddr::from((OTHER, 0))).unwrap();
    let srv = server(root.path(), |c| {
        c.anonymous = false;
        c.users = Some(users.clone());
    });
    let mut c = Ctl::connect(srv.addr());
    c.login("u", "pw");
    let r = c.cmd(&format!(
        "PORT {}",
        format_port(&other.local_addr().unwrap())
    ));
    assert_eq!(r.code, 200, "{r}");
    c.send("RETR f");
    assert_eq!(c.reply().code, 150);
    let (mut s, _) = other.accept().unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"third-party data");
    assert_eq!(c.finish().1.code, 226);
}

#[test]
fn parallelism_is_capped() {
    let root = tempfile::tempdir().unwrap();
    let srv = server(root.path(), |c| c.max_parallelism = 8);
    let mut c = Ctl::anon(srv.addr());
    let r = c.cmd("OPTS RETR Parallelism=100,100,100;");
    assert_eq!(r.code, 501, "{r}");
    assert!(r.text().contains("limit of 8"), "{r}");
    assert_eq!(c.cmd("OPTS RETR Parallelism=8,8,8;").code, 200);
}

/// After `RETR` got its `150`: the thief's connection (made first) reads nothing, and the
/// client's own (carrying `token`, if any) gets all of `data` and the transfer completes.
fn thief_gets_nothing_client_gets_all(
    c: &mut Ctl,
    addr: SocketAddr,
    mut thief: TcpStream,
    token: Option<&[u8]>,
    data: &[u8],
) {
    thief
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut stolen = Vec::new();
    let _ = thief.read_to_end(&mut stolen);
    assert!(stolen.is_empty(), "the thief read {} bytes", stolen.len());
    let mut real = TcpStream::connect(addr).unwrap();
    if let Some(t) = token {
        real.write_all(t).unwrap();
    }
    let mut got = Vec::new();
    real.read_to_end(&mut got).unwrap();
    assert!(
        got == data,
        "the client got the whole file ({} of {} bytes)",
        got.len(),
        data.len()
    );
    assert_eq!(c.finish().1.code, 226);
}

#[test]
fn a_thief_connecting_first_to_the_passive_port_gets_nothing() {
    let root = tempfile::tempdir().unwrap();
    let data = random_bytes(200_000, 5);
    fs::write(root.path().join("f"), &data).unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    let addr = c.pasv();
    let thief = connect_from_other(addr);
    c.send("RETR f");
    assert_eq!(c.reply().code, 150);
    thief_gets_nothing_client_gets_all(&mut c, addr, thief, None, &data);
}

#[test]
fn a_block_injected_from_another_host_never_lands() {
    let root = tempfile::tempdir().unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    c.cmd("MODE E");
    let addr = c.pasv();
    c.send("STOR t");
    assert_eq!(c.reply().code, 150);
    let mut thief = connect_from_other(addr);
    let _ = thief.write_all(&Header::data(0, 8).encode());
    let _ = thief.write_all(b"INJECTED");
    let _ = thief.write_all(&Header::eof(1, true).encode());
    let data = random_bytes(100_000, 6);
    send_bytes(connect_n(addr, 2), data.clone(), 8192)
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(c.finish().1.code, 226);
    assert!(
        fs::read(root.path().join("t")).unwrap() == data,
        "the upload is the client's alone"
    );
}

/// Starts a MODE E STOR of `t` and returns the control client and the data address.
fn start_stor(srv: &haul_server::ServerHandle) -> (Ctl, SocketAddr) {
    let mut c = Ctl::anon(srv.addr());
    c.cmd("MODE E");
    let addr = c.pasv();
    c.send("STOR t");
    assert_eq!(c.reply().code, 150);
    (c, addr)
}

#[test]
fn an_eof_announcing_more_eods_than_ever_arrive_ends_after_the_data_timeout() {
    let root = tempfile::tempdir().unwrap();
    let srv = server(root.path(), |c| c.data_timeout = Duration::from_secs(1));
    let (mut c, addr) = start_stor(&srv);
    let mut d = TcpStream::connect(addr).unwrap();
    d.write_all(&Header::data(0, 4).encode()).unwrap();
    d.write_all(b"abcd").unwrap();
    d.write_all(&Header::eof(3, true).encode()).unwrap();
    let fin = c.finish().1;
    assert_eq!(fin.code, 426, "{fin}");
    assert!(fin.text().contains("no data moved for 1 s"), "{fin}");
    assert!(!root.path().join("t").exists());
    assert_eq!(c.cmd("NOOP").code, 200, "the session goes on");
}

#[test]
fn an_eod_without_eof_ends_when_the_client_leaves() {
    let root = tempfile::tempdir().unwrap();
    // The default data timeout (60 s) is far beyond this test's patience: only the client's
    // leaving can end the transfer in time.
    let srv = server(root.path(), |_| {});
    let (c, addr) = start_stor(&srv);
    let mut d = TcpStream::connect(addr).unwrap();
    d.write_all(&Header::data(0, 4).encode()).unwrap();
    d.write_all(b"abcd").unwrap();
    d.write_all(&Header::eod().encode()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(c);
    assert!(
        eventually(|| srv.sessions() == 0),
        "the session ended with its client"
    );
    // The file is free for the next upload.
    let (mut c2, addr2) = start_stor(&srv);
    send_bytes(connect_n(addr2, 1), b"fresh".to_vec(), 4096)
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(c2.finish().1.code, 226);
    assert_eq!(fs::read(root.path().join("t")).unwrap(), b"fresh");
}

#[test]
fn an_upload_abandoned_before_its_data_connection_frees_the_file_at_once() {
    let root = tempfile::tempdir().unwrap();
    let srv = server(root.path(), |_| {});
    let (c, _addr) = start_stor(&srv);
    drop(c);
    assert!(
        eventually(|| srv.sessions() == 0),
        "the session ended with its client"
    );
    let (mut c2, addr2) = start_stor(&srv);
    send_bytes(connect_n(addr2, 1), b"retry".to_vec(), 4096)
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(c2.finish().1.code, 226);
    assert_eq!(fs::read(root.path().join("t")).unwrap(), b"retry");
}

#[test]
fn a_download_waiting_for_its_data_connection_ends_when_the_client_leaves() {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("f"), b"data").unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    c.pasv();
    c.send("RETR f");
    assert_eq!(c.reply().code, 150);
    drop(c);
    assert!(
        eventually(|| srv.sessions() == 0),
        "the session ended with its client"
    );
}

#[test]
fn blocks_scattered_to_fragment_the_range_set_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let srv = server(root.path(), |_| {});
    let (mut c, addr) = start_stor(&srv);
    let mut d = TcpStream::connect(addr).unwrap();
    let mut buf = Vec::new();
    for i in 0..(haul_transport::mode_e::MAX_RANGES as u64 + 10) {
        buf.extend_from_slice(&Header::data(2 * i, 1).encode());
        buf.push(b'x');
    }
    let _ = d.write_all(&buf);
    let fin = c.finish().1;
    assert_eq!(fin.code, 426, "{fin}");
    assert!(fin.text().contains("separate ranges"), "{fin}");
}

#[test]
fn data_connections_over_the_limit_are_closed() {
    let root = tempfile::tempdir().unwrap();
    let srv = server(root.path(), |c| c.max_parallelism = 4);
    let (c, addr) = start_stor(&srv);
    let conns: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let closed = |s: &TcpStream| {
        s.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        match (&*s).read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        }
    };
    // Long before any timeout could close them.
    assert!(
        eventually(|| conns.iter().filter(|s| closed(s)).count() >= 6),
        "six of ten connections were refused"
    );
    drop(c);
    assert!(
        eventually(|| srv.sessions() == 0),
        "the session ended with its client"
    );
}

#[test]
fn checksum_work_is_bounded() {
    let root = tempfile::tempdir().unwrap();
    // 64 GiB of holes: hashing it takes minutes, unless the work stops with its client.
    let f = fs::File::create(root.path().join("huge")).unwrap();
    f.set_len(64 << 30).unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    let r = c.cmd("CKSM MD5 0 18446744073709551615 /dev/zero");
    assert_eq!(r.code, 501, "{r}");
    c.send("CKSM MD5 0 -1 huge");
    std::thread::sleep(Duration::from_millis(200));
    drop(c);
    assert!(
        eventually(|| srv.sessions() == 0),
        "the checksum stopped with its client"
    );
}

/// `DTOK`: the session's token, as the server gives it.
fn dtok(c: &mut Ctl) -> Vec<u8> {
    let r = c.cmd("DTOK");
    assert_eq!(r.code, 200, "{r}");
    let hex = r
        .text()
        .trim()
        .strip_prefix("DTOK ")
        .expect("DTOK <hex>")
        .to_string();
    (0..16)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

#[test]
fn with_a_token_a_thief_on_the_clients_own_host_gets_nothing() {
    let root = tempfile::tempdir().unwrap();
    let data = random_bytes(100_000, 7);
    fs::write(root.path().join("f"), &data).unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    assert!(c.cmd("FEAT").lines.iter().any(|l| l.trim() == "DTOK"));
    let token = dtok(&mut c);
    let addr = c.pasv();
    // Same address as the client: only the token tells them apart.
    let mut thief = TcpStream::connect(addr).unwrap();
    thief.write_all(&[0u8; 16]).unwrap();
    c.send("RETR f");
    assert_eq!(c.reply().code, 150);
    thief_gets_nothing_client_gets_all(&mut c, addr, thief, Some(&token), &data);
}

#[test]
fn with_a_token_the_server_presents_it_on_connections_it_opens() {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("f"), b"payload").unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    let token = dtok(&mut c);
    let l = c.port();
    c.send("RETR f");
    assert_eq!(c.reply().code, 150);
    let (mut s, _) = l.accept().unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert_eq!(&got[..16], &token[..], "the token comes first");
    assert_eq!(&got[16..], b"payload");
    assert_eq!(c.finish().1.code, 226);
}

/// `ABOR` during a transfer (RFC 959 §4.1.3): the data connection is cut, the transfer gets
/// `426`, the `ABOR` its `226`, and the session goes on.
#[test]
fn abor_cuts_a_running_transfer_with_426_then_226() {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("f"), b"after").unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    let addr = c.pasv();
    c.send("ERET P 0 100000000000 /dev/zero");
    let mut data = TcpStream::connect(addr).unwrap();
    assert_eq!(c.reply().code, 150);
    let mut buf = vec![0u8; 1 << 16];
    data.read_exact(&mut buf).unwrap();
    // The client reads no more: the server's send blocks until the cut.
    c.send("ABOR");
    let r = c.reply();
    assert_eq!(r.code, 426, "{r}");
    assert!(r.text().contains("aborted"), "{r}");
    let r = c.reply();
    assert_eq!(r.code, 226, "{r}");
    assert!(r.text().contains("ABOR"), "{r}");
    // The data connection was closed, and the session still serves.
    data.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut rest = Vec::new();
    let _ = data.read_to_end(&mut rest);
    assert_eq!(c.cmd("SIZE f").code, 213);
}

/// An `ABOR` pipelined behind other commands acts at once: its reply follows the transfer's,
/// and the commands before it are answered afterwards, in order.
#[test]
fn abor_behind_pipelined_commands_acts_at_once() {
    let root = tempfile::tempdir().unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    let addr = c.pasv();
    c.send("ERET P 0 100000000000 /dev/zero");
    let data = TcpStream::connect(addr).unwrap();
    assert_eq!(c.reply().code, 150);
    c.raw(b"NOOP\r\nPWD\r\nABOR\r\n");
    let codes: Vec<u16> = (0..4).map(|_| c.reply().code).collect();
    assert_eq!(
        codes,
        [426, 226, 200, 257],
        "transfer, ABOR, then NOOP and PWD"
    );
    drop(data);
}

/// UDT data channels keep foreign peers out as TCP ones do: libudt completes the handshake of
/// any host on the passive port, and the server closes it unread, then still serves its client.
#[test]
fn a_udt_connection_from_another_host_is_closed_unread() {
    use haul_transport::udt::{Options, UdtStream, AVAILABLE};
    if !AVAILABLE {
        eprintln!("skipped: this build has no UDT4 (install libudt-dev and rebuild)");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    assert_eq!(c.cmd("SITE SETNETSTACK udt").code, 200);
    let addr = c.pasv();
    let o = Options::default();
    let mut thief = UdtStream::connect(addr, Some(OTHER.into()), &o).expect("libudt handshakes");
    let _ = thief.write_all(b"EVIL");
    std::thread::sleep(Duration::from_millis(200));
    c.send("STOR f");
    let mut real = UdtStream::connect(addr, None, &o).unwrap();
    assert_eq!(c.reply().code, 150);
    let body = random_bytes(300_000, 3);
    real.write_all(&body).unwrap();
    real.close().unwrap();
    let (_, r) = c.finish();
    assert_eq!(r.code, 226, "{r}");
    assert_eq!(
        fs::read(root.path().join("f")).unwrap(),
        body,
        "only the client's bytes"
    );
}

/// `data_ports`: passive listeners take ports in the range only, skip the busy ones, and a
/// session that finds none free gets `425`.
#[test]
fn passive_ports_stay_in_the_data_port_range() {
    let dir = tempfile::tempdir().unwrap();
    // A range of two ports whose first one this test holds, so the server must skip it.
    let (held, low) = loop {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let p = l.local_addr().unwrap().port();
        if p < u16::MAX && TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            break (l, p);
        }
    };
    let srv = server(dir.path(), |c| c.data_ports = Some((low, low + 1)));
    let mut a = Ctl::anon(srv.addr());
    assert_eq!(a.pasv().port(), low + 1);
    let mut b = Ctl::anon(srv.addr());
    let r = b.cmd("PASV");
    assert_eq!(r.code, 425, "{r}");
    assert!(r.text().contains("data-ports"), "{r}");
    drop(held);
    assert_eq!(b.pasv().port(), low);
}
