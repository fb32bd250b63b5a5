//! XXHC over real MODE E connections: blocks that arrive in reverse order, spread over two
//! streams, still give the digest of the file, hashed as they land.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use haul_proto::mode_e::Header;
use haul_transport::checksum::{chunked, Algorithm, Hasher, HashingSink};
use haul_transport::mode_e::{self, Progress};
use haul_transport::{socket, Conn};

#[test]
fn blocks_in_reverse_order_verify() {
    let len = 3 * chunked::CHUNK as usize + 70_001;
    let data: Vec<u8> = (0..len as u64).map(|i| (i * 131 % 251) as u8).collect();
    let l = socket::listen("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let addr = l.local_addr().unwrap();
    let sent = data.clone();
    let sender = std::thread::spawn(move || {
        let mut conns: Vec<TcpStream> = (0..2)
            .map(|_| socket::connect(addr, None, Duration::from_secs(5)).unwrap())
            .collect();
        let block = 256 * 1024;
        let blocks: Vec<(usize, &[u8])> = sent.chunks(block).enumerate().collect();
        for (k, &(i, b)) in blocks.iter().rev().enumerate() {
            let c = &mut conns[k % 2];
            c.write_all(&Header::data((i * block) as u64, b.len() as u64).encode())
                .unwrap();
            c.write_all(b).unwrap();
        }
        conns[0].write_all(&Header::eof(2, true).encode()).unwrap();
        conns[1].write_all(&Header::eod().encode()).unwrap();
    });
    let conns: Vec<Conn> = (0..2)
        .map(|_| Box::new(l.accept().unwrap().0) as Conn)
        .collect();
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("f.part");
    let file = std::fs::File::create(&path).unwrap();
    let sink = HashingSink::new(&file, Algorithm::Xxhc, &path);
    let p = Progress::default();
    mode_e::receive(conns, None, &sink, &p, Some(len as u64), 1 << 20).unwrap();
    sender.join().unwrap();
    let (hex, list) = sink
        .finish_full(len as u64)
        .expect("every byte hashed once");
    let mut whole = Hasher::new(Algorithm::Xxhc);
    whole.update(&data);
    assert_eq!(
        hex,
        whole.finish_hex(),
        "the digest of the file, in file order"
    );
    assert_eq!(list.unwrap().digests.len(), 4);
    assert_eq!(std::fs::read(&path).unwrap(), data);
}
