//! Fuzzes the PLUT datagram parser and both state machines: arbitrary bytes must never panic
//! `Datagram::parse`; whatever it accepts must re-encode to the same bytes; and a receiver and
//! a sender fed the bytes as datagrams must drop them (or, for a valid DATA datagram of the
//! session, accept it) without panicking or writing out of order.

#![no_main]

use haul_plut::wire::{encode_ack, Datagram, DATA_HEADER_LEN};
use haul_plut::{Config, Receiver, Sender};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match Datagram::parse(data) {
        Ok(Datagram::Data(h, payload)) => {
            let mut b = vec![0u8; DATA_HEADER_LEN + payload.len()];
            h.encode(&mut b).expect("room for the header");
            b[DATA_HEADER_LEN..].copy_from_slice(payload);
            assert_eq!(b, data, "DATA did not round-trip");
        }
        Ok(Datagram::Ack(a)) => {
            let losses: Vec<_> = a.losses().collect();
            let mut b = vec![0u8; data.len()];
            let n = encode_ack(&a.header, &losses, &mut b).expect("a parsed ACK re-encodes");
            assert_eq!(&b[..n], data, "ACK did not round-trip");
        }
        Err(_) => {}
    }
    // The session id the input claims, so some inputs get past the session check.
    let session = data
        .get(4..12)
        .map_or(0, |s| u64::from_be_bytes(s.try_into().expect("8 bytes")));
    // Small buffers keep each run cheap.
    let cfg = Config {
        session,
        mds: 1472,
        send_buffer: 8,
        window: 64,
        ..Config::default()
    };
    let mut receiver = Receiver::new(cfg.clone(), 1 << 16).expect("valid config");
    let mut out = Vec::new();
    // The Vec sink errors on an out-of-order write, which must never happen.
    receiver
        .handle_datagram(1, data, &mut out)
        .expect("in-order writes");
    for chunk in data.chunks(97) {
        receiver
            .handle_datagram(2, chunk, &mut out)
            .expect("in-order writes");
    }
    let mut buf = vec![0u8; 1472];
    while let Ok(Some(_)) = receiver.poll_transmit(3, &mut buf) {}
    let mut sender = Sender::new(cfg, 1 << 16).expect("valid config");
    let file = [0u8; 1 << 16];
    for _ in 0..4 {
        let _ = sender.poll_transmit(0, &mut buf, &file[..]);
    }
    sender.handle_datagram(5, data);
    sender.handle_timeout(u64::MAX / 2);
});
