//! Data transfers of `haul-server`: MODE E with parallel streams both ways, connection reuse,
//! ERET/ESTO, REST ranges, CKSM, markers, listings and the virtual devices.
mod common;

use std::fs;

use common::*;

#[test]
fn mode_e_retr_4_streams_then_reuse_with_125() {
    let root = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let a = random_bytes(5 << 20 | 123, 1);
    let b = random_bytes(777_777, 2);
    fs::write(root.path().join("a"), &a).unwrap();
    fs::write(root.path().join("b"), &b).unwrap();
    let srv = server(root.path(), |c| c.block_size = 65536);
    let mut c = Ctl::anon(srv.addr());
    assert_eq!(c.cmd("MODE E").code, 200);
    assert_eq!(c.cmd("OPTS RETR Parallelism=4,4,4;").code, 200);
    let l = c.port();
    c.send("RETR /a");
    let r = c.reply();
    assert_eq!(r.code, 150, "{r}");
    let conns = accept_n(&l, 4);
    let h = receive_into(conns, &out.path().join("a"));
    assert_eq!(c.finish().1.code, 226);
    let conns = h.join().unwrap().expect("MODE E receive");
    assert_eq!(conns.len(), 4, "connections stay open for reuse");
    assert_eq!(fs::read(out.path().join("a")).unwrap(), a);

    c.send("RETR b");
    let (pre, fin) = c.finish();
    assert_eq!(pre[0].code, 125, "{}", pre[0]);
    assert_eq!(fin.code, 226);
    let h = receive_into(conns, &out.path().join("b"));
    h.join()
        .unwrap()
        .expect("second receive on cached connections");
    assert_eq!(fs::read(out.path().join("b")).unwrap(), b);
}

#[test]
fn mode_e_stor_4_streams_with_markers() {
    let root = tempfile::tempdir().unwrap();
    let data = random_bytes(6 << 20, 3);
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    assert_eq!(c.cmd("MODE E").code, 200);
    let addr = c.pasv();
    // The client may connect before STOR (globus-url-copy does).
    let mut conns = connect_n(addr, 1);
    c.send("STOR /up");
    assert_eq!(c.reply().code, 150);
    conns.extend(connect_n(addr, 3));
    let h = send_bytes(conns, data.clone(), 1 << 20);
    let (pre, fin) = c.finish();
    assert_eq!(fin.code, 226, "{fin}");
    let conns = h.join().unwrap().expect("send");
    assert!(
        pre.iter()
            .any(|r| r.code == 112 && r.lines[0] == "Perf Marker"),
        "perf marker sent"
    );
    let last = pre.last().unwrap();
    assert_eq!(last.code, 111, "range marker right before 226: {last}");
    assert_eq!(last.text(), format!("Range Marker 0-{}", data.len()));
    assert_eq!(fs::read(root.path().join("up")).unwrap(), data);
    assert!(!root.path().join(".up.haul-part").exists());

    // Second upload reuses the 4 connections.
    c.send("STOR /up2");
    assert_eq!(c.reply().code, 125);
    let h = send_bytes(conns, data[..1000].to_vec(), 1 << 20);
    assert_eq!(c.finish().1.code, 226);
    h.join().unwrap().unwrap();
    assert_eq!(fs::read(root.path().join("up2")).unwrap(), &data[..1000]);
}

#[test]
fn eret_and_esto_partial() {
    let root = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let data = random_bytes(100_000, 4);
    fs::write(root.path().join("f"), &data).unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    c.cmd("MODE E");
    let l = c.port();
    c.send("ERET P 1000 5000 /f");
    assert_eq!(c.reply().code, 150);
    let h = receive_into(accept_n(&l, 1), &out.path().join("part"));
    assert_eq!(c.finish().1.code, 226);
    h.join().unwrap().unwrap();
    // Block offsets are relative to the ERET start.
    assert_eq!(
        fs::read(out.path().join("part")).unwrap(),
        &data[1000..6000]
    );

    fs::write(root.path().join("g"), vec![b'x'; 10]).unwrap();
    let addr = c.pasv();
    c.send("ESTO A 4 /g");
    assert_eq!(c.reply().code, 150);
    let h = send_bytes(connect_n(addr, 2), b"HELLO".to_vec(), 4096);
    assert_eq!(c.finish().1.code, 226);
    h.join().unwrap().unwrap();
    assert_eq!(fs::read(root.path().join("g")).unwrap(), b"xxxxHELLOx");
}

#[test]
fn rest_ranges_send_only_missing() {
    let root = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let data = random_bytes(300_000, 5);
    fs::write(root.path().join("f"), &data).unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    c.cmd("MODE E");
    let l = c.port();
    assert_eq!(c.cmd("REST 0-100000,200000-250000").code, 350);
    c.send("RETR f");
    assert_eq!(c.reply().code, 150);
    let dst = out.path().join("f");
    fs::write(&dst, vec![0u8; 300_000]).unwrap();
    let f = fs::OpenOptions::new().write(true).open(&dst).unwrap();
    let conns = accept_n(&l, 1);
    let h = std::thread::spawn(move || {
        let p = haul_transport::mode_e::Progress::default();
        haul_transport::mode_e::receive(conns, None, &f, &p, None, 1 << 20).map(|_| p.ranges())
    });
    assert_eq!(c.finish().1.code, 226);
    let got = h.join().unwrap().unwrap();
    assert_eq!(
        got.to_string(),
        "100000-200000,250000-300000",
        "only the missing ranges, absolute offsets"
    );
    let back = fs::read(&dst).unwrap();
    assert_eq!(&back[100_000..200_000], &data[100_000..200_000]);
    assert!(
        back[..100_000].iter().all(|&b| b == 0),
        "held ranges not resent"
    );
}

#[test]
fn cksm_algorithms() {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("f"), b"hello world").unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    assert_eq!(
        c.cmd("CKSM MD5 0 -1 /f").text(),
        "5eb63bbbe01eeed093cb22bb8f5acdc3"
    );
    assert_eq!(c.cmd("CKSM ADLER32 0 -1 f").text(), "1a0b045d");
    assert_eq!(
        c.cmd("CKSM MD5 6 5 f").text(),
        "7d793037a0760186574b0282f2f435e7",
        "md5(\"world\")"
    );
    assert_eq!(c.cmd("CKSM CRC32C 0 -1 f").code, 213);
    assert_eq!(c.cmd("CKSM XXH128 0 -1 f").text().len(), 32);
    let r = c.cmd("CKSM SHA7 0 -1 f");
    assert_eq!(r.code, 504);
    assert!(r.text().contains("SHA7"), "{r}");
    assert_eq!(c.cmd("CKSM MD5 0 -1 missing").code, 550);
}

/// `RETR f` with `CKSM f` pipelined behind it: the digest comes from the bytes as they were
/// sent (one stream: in order; four: partly read back), arrives with the 226 in one segment,
/// and a file changed since is hashed afresh.
#[test]
fn pipelined_cksm_after_retr() {
    let root = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let data = random_bytes(3 << 20 | 77, 11);
    fs::write(root.path().join("f"), &data).unwrap();
    // A file written in the last seconds is hashed afresh for CKSM (its timestamps cannot
    // vouch for its content yet); this one is as old as most served files.
    let ten_s_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(10);
    fs::File::options()
        .write(true)
        .open(root.path().join("f"))
        .unwrap()
        .set_modified(ten_s_ago)
        .unwrap();
    let srv = server(root.path(), |c| c.block_size = 65536);
    let md5 = |b: &[u8]| {
        let mut h = haul_transport::checksum::Hasher::new(haul_transport::checksum::Algorithm::Md5);
        h.update(b);
        h.finish_hex()
    };
    for streams in [1, 4] {
        let mut c = Ctl::anon(srv.addr());
        assert_eq!(c.cmd("MODE E").code, 200);
        assert_eq!(
            c.cmd(&format!(
                "OPTS RETR Parallelism={streams},{streams},{streams};"
            ))
            .code,
            200
        );
        let l = c.port();
        c.raw(b"RETR /f\r\nCKSM MD5 0 -1 f\r\n");
        assert_eq!(c.reply().code, 150);
        let h = receive_into(accept_n(&l, streams), &out.path().join("f"));
        assert_eq!(c.finish().1.code, 226);
        let r = c.reply();
        assert_eq!((r.code, r.text()), (213, md5(&data)), "{streams} streams");
        let conns = h.join().unwrap().expect("MODE E receive");
        assert_eq!(fs::read(out.path().join("f")).unwrap(), data);

        // The same again on the cached connections.
        c.raw(b"RETR /f\r\nCKSM MD5 0 -1 /f\r\n");
        assert_eq!(c.reply().code, 125);
        let h = receive_into(conns, &out.path().join("f"));
        assert_eq!(c.finish().1.code, 226);
        assert_eq!(c.reply().text(), md5(&data));
        h.join().unwrap().expect("second receive");
    }

    // The file changes while it is sent: the CKSM is of the file as it is now, not of the
    // bytes the server read to hash, so a client that received a mix sees the mismatch. Small
    // socket buffers hold the sender back until the file has changed. (The server sends a
    // plain file's pages with sendfile, as they are when they go out, so what arrives may
    // already be all of the new content; then the two digests agree, as they should.)
    let mut c = Ctl::anon(srv.addr());
    assert_eq!(c.cmd("SBUF 8192").code, 200);
    assert_eq!(c.cmd("MODE E").code, 200);
    let l = c.port();
    c.raw(b"RETR /f\r\nCKSM MD5 0 -1 /f\r\n");
    assert_eq!(c.reply().code, 150);
    let conns = accept_n(&l, 1);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let changed = random_bytes(data.len(), 12);
    {
        use std::os::unix::fs::FileExt;
        let f = fs::OpenOptions::new()
            .write(true)
            .open(root.path().join("f"))
            .unwrap();
        f.write_all_at(&changed, 0).unwrap();
    }
    let h = receive_into(conns, &out.path().join("f"));
    assert_eq!(c.finish().1.code, 226);
    assert_eq!(c.reply().text(), md5(&changed));
    h.join().unwrap().expect("receive");
    let got = fs::read(out.path().join("f")).unwrap();
    assert!(
        got != data,
        "the change made while the sender was held back reached the client"
    );
}

/// `STOR f` with `CKSM f` pipelined behind it: the digest comes from the blocks as they were
/// written (four streams: partly read back), and is the stored file's.
#[test]
fn pipelined_cksm_after_stor() {
    let root = tempfile::tempdir().unwrap();
    let data = random_bytes(5 << 20 | 99, 13);
    let srv = server(root.path(), |_| {});
    let xxh = |b: &[u8]| {
        let mut h =
            haul_transport::checksum::Hasher::new(haul_transport::checksum::Algorithm::Xxh128);
        h.update(b);
        h.finish_hex()
    };
    let mut c = Ctl::anon(srv.addr());
    assert_eq!(c.cmd("MODE E").code, 200);
    let addr = c.pasv();
    let mut conns = connect_n(addr, 4);
    for (name, len) in [("a", data.len()), ("b", 1000), ("c", 0)] {
        c.raw(format!("STOR {name}\r\nCKSM XXH128 0 -1 /{name}\r\n").as_bytes());
        assert!(c.reply().is_preliminary());
        let h = send_bytes(conns, data[..len].to_vec(), 1 << 20);
        assert_eq!(c.finish().1.code, 226);
        let r = c.reply();
        assert_eq!((r.code, r.text()), (213, xxh(&data[..len])), "{name}");
        conns = h.join().unwrap().expect("send");
        assert_eq!(fs::read(root.path().join(name)).unwrap(), &data[..len]);
    }
}

#[test]
fn dev_zero_eret_and_stor_dev_null() {
    let root = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let srv = server(root.path(), |c| c.anonymous_write = false);
    let mut c = Ctl::anon(srv.addr());
    c.cmd("MODE E");
    c.cmd("OPTS RETR Parallelism=2,2,2;");
    let l = c.port();
    c.send("ERET P 0 3000000 /dev/zero");
    assert_eq!(c.reply().code, 150);
    let h = receive_into(accept_n(&l, 2), &out.path().join("z"));
    assert_eq!(c.finish().1.code, 226);
    h.join().unwrap().unwrap();
    let z = fs::read(out.path().join("z")).unwrap();
    assert_eq!(z.len(), 3_000_000);
    assert!(z.iter().all(|&b| b == 0));
    let r = c.cmd("RETR /dev/zero");
    assert_eq!(r.code, 550, "endless without ERET: {r}");

    let addr = c.pasv();
    c.send("STOR /dev/null");
    assert_eq!(c.reply().code, 150);
    let h = send_bytes(connect_n(addr, 3), random_bytes(2_000_000, 6), 1 << 16);
    assert_eq!(c.finish().1.code, 226);
    h.join().unwrap().unwrap();
    assert_eq!(
        fs::read_dir(root.path()).unwrap().count(),
        0,
        "nothing written to disk"
    );
}

#[test]
fn listings_in_mode_s_and_mode_e() {
    let root = tempfile::tempdir().unwrap();
    fs::create_dir(root.path().join("dir")).unwrap();
    fs::write(root.path().join("dir/one"), b"1").unwrap();
    fs::create_dir(root.path().join("dir/sub")).unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    let addr = c.pasv();
    c.send("MLSD dir");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut body = String::new();
    std::io::Read::read_to_string(&mut s, &mut body).unwrap();
    assert_eq!(c.finish().1.code, 226);
    assert!(
        body.contains("Type=cdir;") && body.contains("Type=pdir;"),
        "{body}"
    );
    assert!(
        body.contains("Type=file;") && body.contains("Size=1;") && body.contains("; one\r\n"),
        "{body}"
    );
    assert!(
        body.contains("Type=dir;") && body.contains("; sub\r\n"),
        "{body}"
    );

    let addr = c.pasv();
    c.send("NLST dir");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut names = String::new();
    std::io::Read::read_to_string(&mut s, &mut names).unwrap();
    assert_eq!(c.finish().1.code, 226);
    assert_eq!(names, "one\r\nsub\r\n");

    c.cmd("MODE E");
    let l = c.port();
    c.send("MLSD /dir");
    assert_eq!(c.reply().code, 150);
    let out = tempfile::tempdir().unwrap();
    let h = receive_into(accept_n(&l, 1), &out.path().join("l"));
    assert_eq!(c.finish().1.code, 226);
    h.join().unwrap().unwrap();
    assert_eq!(
        fs::read_to_string(out.path().join("l")).unwrap(),
        body,
        "same listing in MODE E"
    );
}

#[test]
fn mode_s_retr_and_stor_with_rest() {
    let root = tempfile::tempdir().unwrap();
    let data = random_bytes(200_000, 8);
    fs::write(root.path().join("f"), &data).unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    let addr = c.pasv();
    assert_eq!(c.cmd("REST 1000").code, 350);
    c.send("RETR f");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut s, &mut got).unwrap();
    assert_eq!(c.finish().1.code, 226);
    assert_eq!(got, &data[1000..]);

    let addr = c.pasv();
    c.send("STOR g");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    std::io::Write::write_all(&mut s, &data).unwrap();
    drop(s);
    assert_eq!(c.finish().1.code, 226);
    assert_eq!(fs::read(root.path().join("g")).unwrap(), data);
}

#[test]
fn spas_and_spor_striped_commands() {
    let root = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let data = random_bytes(1 << 20, 14);
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    c.cmd("MODE E");
    let r = c.cmd("SPAS");
    assert_eq!(r.code, 229, "{r}");
    assert_eq!(r.lines[0], "Entering Striped Passive Mode.");
    let addr = haul_proto::hostport::find_in_reply(&r.lines[1]).expect("host-port line");
    c.send("STOR s");
    assert_eq!(c.reply().code, 150);
    let h = send_bytes(connect_n(addr, 2), data.clone(), 1 << 16);
    assert_eq!(c.finish().1.code, 226);
    h.join().unwrap().unwrap();
    assert_eq!(fs::read(root.path().join("s")).unwrap(), data);

    // SPOR with two stripe addresses: the server spreads its streams over both.
    let l1 = haul_transport::socket::listen("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let l2 = haul_transport::socket::listen("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let fmt =
        |l: &std::net::TcpListener| haul_proto::hostport::format_port(&l.local_addr().unwrap());
    assert_eq!(c.cmd("OPTS RETR Parallelism=2,2,2;").code, 200);
    assert_eq!(c.cmd(&format!("SPOR {} {}", fmt(&l1), fmt(&l2))).code, 200);
    c.send("RETR s");
    assert_eq!(c.reply().code, 150);
    let mut conns = accept_n(&l1, 1);
    conns.extend(accept_n(&l2, 1));
    let h = receive_into(conns, &out.path().join("s"));
    assert_eq!(c.finish().1.code, 226);
    h.join().unwrap().unwrap();
    assert_eq!(fs::read(out.path().join("s")).unwrap(), data);

    let r = c.cmd("EPSV");
    assert_eq!(r.code, 229);
    assert!(
        r.text().starts_with("Entering Extended Passive Mode (|||"),
        "{r}"
    );
}

/// A second writer to a file being uploaded is refused with 450 instead of interleaving its
/// blocks into the same part file; the other writer's bytes stay as they were.
#[test]
fn a_second_upload_to_a_file_in_progress_is_refused() {
    use std::os::fd::AsRawFd;
    let root = tempfile::tempdir().unwrap();
    let srv = server(root.path(), |_| {});
    // Another session's upload of `g`, holding its part file (as the server does).
    let part = root.path().join(".g.haul-part");
    fs::write(&part, b"someone else's bytes").unwrap();
    let other = fs::OpenOptions::new().write(true).open(&part).unwrap();
    assert_eq!(
        // SAFETY: flock on the descriptor of a file this test holds open.
        unsafe { libc::flock(other.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );
    let mut c = Ctl::anon(srv.addr());
    c.pasv();
    let r = c.cmd("STOR g");
    assert_eq!(r.code, 450, "{r:?}");
    assert!(r.lines.concat().contains("in progress"), "{r:?}");
    assert_eq!(
        fs::read(&part).unwrap(),
        b"someone else's bytes",
        "nothing truncated"
    );
    // Once the other upload ends, the file can be written.
    drop(other);
    let addr = c.pasv();
    c.send("STOR g");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    std::io::Write::write_all(&mut s, b"mine").unwrap();
    drop(s);
    assert_eq!(c.finish().1.code, 226);
    assert_eq!(fs::read(root.path().join("g")).unwrap(), b"mine");
}
