//! The relay pump between two real MODE E legs over loopback TCP: whatever order and stream
//! the blocks arrive on, what leaves is byte-identical, with a pump far smaller than the file;
//! MODE S on the sending leg; and a failure on either side stopping the other.

use std::net::TcpListener;
use std::sync::Mutex;
use std::time::Duration;

use haul_transport::io::Sink;
use haul_transport::mode_e::{self, Acceptor, Progress};
use haul_transport::pump::{Framing, Pump};
use haul_transport::{socket, stream, Conn};
use rand::{Rng, SeedableRng};

fn data(len: usize, seed: u64) -> Vec<u8> {
    let mut r = rand::rngs::StdRng::seed_from_u64(seed);
    (0..len).map(|_| r.gen()).collect()
}

struct Mem(Mutex<Vec<u8>>);

impl Sink for Mem {
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        let mut v = self.0.lock().unwrap();
        let end = offset as usize + buf.len();
        if v.len() < end {
            v.resize(end, 0);
        }
        v[offset as usize..end].copy_from_slice(buf);
        Ok(())
    }
}

/// `n` connected pairs: (our ends, the far ends).
fn pairs(n: usize) -> (Vec<Conn>, Vec<Conn>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let mut near = Vec::new();
    let mut far = Vec::new();
    for _ in 0..n {
        near.push(Box::new(socket::connect(addr, None, Duration::from_secs(5)).unwrap()) as Conn);
        far.push(Box::new(l.accept().unwrap().0) as Conn);
    }
    (near, far)
}

struct NoMore;

impl Acceptor for NoMore {
    fn accept(&self, _wait: Duration) -> std::io::Result<Option<Conn>> {
        Ok(None)
    }
}

/// origin --(in_streams, MODE E)--> pump --(out_streams, framing)--> client; returns what the
/// client received.
fn relay(
    file: &[u8],
    in_streams: usize,
    out_streams: usize,
    framing: Framing,
    cap: usize,
) -> Vec<u8> {
    let (mut origin, relay_in) = pairs(in_streams);
    let (mut relay_out, client) = pairs(out_streams);
    let pump = Pump::new(cap);
    let got = Mem(Mutex::new(Vec::new()));
    std::thread::scope(|s| {
        s.spawn(|| {
            let p = Progress::default();
            mode_e::send(
                &mut origin,
                &file.to_vec(),
                &[(0, file.len() as u64)],
                64 << 10,
                &p,
                true,
            )
            .unwrap();
        });
        s.spawn(|| {
            let p = Progress::default();
            let r = mode_e::receive(relay_in, Some(&NoMore), &pump, &p, None, 64 << 10);
            r.unwrap();
            pump.close();
        });
        s.spawn(|| {
            pump.drain(&mut relay_out, framing, &Progress::default())
                .unwrap();
        });
        let p = Progress::default();
        match framing {
            Framing::Extended { .. } => {
                mode_e::receive(client, Some(&NoMore), &got, &p, None, 64 << 10).unwrap();
            }
            Framing::Stream => {
                let mut c = client;
                stream::receive(c.remove(0), &got, 0, &p).unwrap();
            }
        }
    });
    got.0.into_inner().unwrap()
}

#[test]
fn blocks_cross_the_pump_byte_identical_with_different_stream_counts() {
    let file = data(9_000_011, 7);
    // 4 streams in, 3 out, through a pump of 1 MiB: a ninth of the file.
    let got = relay(&file, 4, 3, Framing::Extended { close: true }, 1 << 20);
    assert!(got == file, "relayed bytes differ");
    // 1 in, 5 out.
    let got = relay(&file, 1, 5, Framing::Extended { close: false }, 1 << 20);
    assert!(got == file, "relayed bytes differ (1 -> 5 streams)");
}

#[test]
fn a_mode_s_leg_gets_the_bytes_in_order() {
    let file = data(3_000_000, 8);
    let got = relay(&file, 1, 1, Framing::Stream, 1 << 20);
    assert!(got == file, "relayed bytes differ (MODE S)");
}

#[test]
fn a_mode_s_leg_refuses_blocks_out_of_order() {
    let pump = Pump::new(4 << 20);
    pump.write_at(&[1; 10], 10).unwrap();
    pump.write_at(&[0; 10], 0).unwrap();
    pump.close();
    let (mut out, _far) = pairs(1);
    let e = pump
        .drain(&mut out, Framing::Stream, &Progress::default())
        .unwrap_err();
    assert!(e.to_string().contains("in order"), "{e}");
    // The receiving leg now fails too rather than filling a pump nobody drains.
    let e = pump.write_at(&[2; 10], 20).unwrap_err();
    assert!(e.to_string().contains("relay stopped"), "{e}");
}

#[test]
fn a_failed_sending_leg_frees_a_writer_waiting_for_room() {
    let pump = Pump::new(1 << 20);
    pump.write_at(&vec![0; 1 << 20], 0).unwrap();
    std::thread::scope(|s| {
        // The pump is full: this write waits until the failure below.
        let w = s.spawn(|| pump.write_at(&[0; 4096], 1 << 20));
        pump.fail("the client left");
        let e = w.join().unwrap().unwrap_err();
        assert!(e.to_string().contains("the client left"), "{e}");
    });
}

#[test]
fn a_failed_receiving_leg_ends_the_sending_leg_without_an_eof() {
    let pump = Pump::new(1 << 20);
    pump.write_at(&[5; 1000], 0).unwrap();
    let (mut out, far) = pairs(2);
    std::thread::scope(|s| {
        let d = s.spawn(|| {
            pump.drain(
                &mut out,
                Framing::Extended { close: false },
                &Progress::default(),
            )
        });
        pump.fail("next hop: 451 disk full");
        let e = d.join().unwrap().unwrap_err();
        assert!(e.to_string().contains("disk full"), "{e}");
    });
    drop(out);
    // The far end sees the data connections end before any EOD: an incomplete transfer.
    let got = Mem(Mutex::new(Vec::new()));
    let r = mode_e::receive(far, None, &got, &Progress::default(), None, 64 << 10);
    assert!(r.is_err(), "a failed relay must not look complete");
}

/// Reads MODE E blocks off one connection until its EOD: (offset, length) of each data block.
fn blocks_on(mut c: Conn) -> Vec<(u64, u64)> {
    use haul_proto::mode_e::{Descriptor, Header, HEADER_LEN};
    use std::io::Read;
    let mut seen = Vec::new();
    loop {
        let mut h = [0u8; HEADER_LEN];
        c.read_exact(&mut h).unwrap();
        let h = Header::decode(&h).unwrap();
        if h.count > 0 {
            let mut payload = vec![0u8; h.count as usize];
            c.read_exact(&mut payload).unwrap();
            seen.push((h.offset, h.count));
        }
        if h.descriptor.has(Descriptor::EOD) {
            return seen;
        }
    }
}

/// Whatever streams the blocks come in on, the sending leg keeps each 1 MiB XXHC chunk on one
/// stream, in order, so a receiver hashing chunks as they land never reads one back; and the
/// streams share the chunks out rather than one taking them all.
#[test]
fn each_xxhc_chunk_leaves_on_one_stream_in_order() {
    use haul_transport::checksum::chunked::CHUNK;
    let file = data(12 * CHUNK as usize + 4321, 9);
    let (mut origin, relay_in) = pairs(4);
    let (mut relay_out, client) = pairs(4);
    let pump = Pump::new(4 << 20);
    let per_stream: Vec<Vec<(u64, u64)>> = std::thread::scope(|s| {
        s.spawn(|| {
            let r = [(0, file.len() as u64)];
            mode_e::send(
                &mut origin,
                &file.to_vec(),
                &r,
                256 << 10,
                &Progress::default(),
                true,
            )
            .unwrap();
        });
        s.spawn(|| {
            let p = Progress::default();
            mode_e::receive(relay_in, Some(&NoMore), &pump, &p, None, 256 << 10).unwrap();
            pump.close();
        });
        s.spawn(|| {
            let f = Framing::Extended { close: true };
            pump.drain(&mut relay_out, f, &Progress::default()).unwrap();
        });
        let readers: Vec<_> = client
            .into_iter()
            .map(|c| s.spawn(|| blocks_on(c)))
            .collect();
        readers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut owner = std::collections::HashMap::new();
    let mut total = 0;
    for (stream, blocks) in per_stream.iter().enumerate() {
        let mut next_in_chunk = std::collections::HashMap::new();
        for &(offset, len) in blocks {
            let chunk = offset / CHUNK;
            assert_eq!(
                offset / CHUNK,
                (offset + len - 1) / CHUNK,
                "a block within one chunk"
            );
            let o = *owner.entry(chunk).or_insert(stream);
            assert_eq!(
                o, stream,
                "chunk {chunk} went out on streams {o} and {stream}"
            );
            let want = next_in_chunk.entry(chunk).or_insert(chunk * CHUNK);
            assert_eq!(offset, *want, "chunk {chunk}'s blocks in order");
            *want = offset + len;
            total += len;
        }
    }
    assert_eq!(total, file.len() as u64, "every byte sent once");
    let used = per_stream.iter().filter(|b| !b.is_empty()).count();
    assert!(
        used >= 2,
        "the chunks were shared out: {used} of 4 streams used"
    );
}
