//! Memory-to-memory PLUT between two hosts (e.g. `haul netem` namespaces), without a control
//! channel: `/dev/zero` on the sender, `/dev/null` on the receiver, with the IO layer's debug
//! trace (commanded vs. achieved send rate, controller state, receiver goodput, receive lag and
//! UDP receive-buffer drops) every 100 ms on stderr.
//!
//! ```sh
//! haul netem run b -- plut_net recv 10.78.0.2:7000 2000000000 &
//! haul netem run a -- plut_net send 10.78.0.2:7000 2000000000 [NIC_RATE_BITS] [INITIAL_RATE_BITS]
//! ```
//!
//! The sender's NIC rate B defaults to 10 Gbit/s as `haul cp` uses it; the receiver exits once
//! the transfer is complete. `PLUT_TRACE=0` turns the trace off; `MDS=n` sets the datagram size
//! on both ends (default: the path MTU's at the sender, 1472 at the receiver).

use std::net::SocketAddr;

use haul_transport::io::{Null, Zero};
use haul_transport::mode_e::Progress;
use haul_transport::plut::{self, Tuning};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The IO layer's trace on stderr, unless PLUT_TRACE=0.
    if std::env::var("PLUT_TRACE").map_or(true, |v| v != "0") {
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_env_filter("haul_transport::plut=debug")
            .init();
    }
    let mut args = std::env::args().skip(1);
    let usage = "usage: plut_net send|recv ADDR:PORT BYTES [NIC_RATE_BITS] [INITIAL_RATE_BITS]";
    let mode = args.next().ok_or(usage)?;
    let addr: SocketAddr = args.next().ok_or(usage)?.parse()?;
    let len: u64 = args.next().ok_or(usage)?.parse()?;
    let rate: f64 = args.next().map_or(Ok(plut::params::DEFAULT_RATE), |a| {
        a.parse::<f64>().map(|b| b / 8.0)
    })?;
    // Both ends must agree on the MDS: `MDS` if set, else the sender's path MTU (the receiver,
    // whose own address would give the loopback MTU, assumes the default).
    let mds = match std::env::var("MDS") {
        Ok(m) => m.parse()?,
        Err(_) if mode == "send" => plut::path_mds(addr.ip()).unwrap_or(plut::DEFAULT_MDS),
        Err(_) => plut::DEFAULT_MDS,
    };
    let mut cfg = plut::config(0x5eed, mds, rate, 96 << 20);
    if let Some(r) = args.next() {
        cfg.initial_rate = r.parse::<f64>()? / 8.0;
    }
    let tuning = Tuning::default();
    let progress = Progress::default();
    match mode.as_str() {
        "recv" => {
            let sock = plut::bind(addr, &tuning)?;
            let s = plut::receive(&sock, &Null, 0, len, &cfg, &tuning, &progress)?;
            let r = s.receiver.unwrap_or_default();
            println!(
                "{{\"end\":\"recv\",\"bytes\":{len},\"mds\":{mds},\"goodput_bps\":{:.0},\"elapsed_s\":{:.3},\"cpu_s\":{:.3},\"duplicates\":{},\"acks\":{}}}",
                len as f64 * 8.0 / s.elapsed_s,
                s.elapsed_s,
                s.cpu_s,
                r.duplicates,
                r.acks
            );
        }
        "send" => {
            let local: SocketAddr = if addr.is_ipv4() {
                "0.0.0.0:0".parse()?
            } else {
                "[::]:0".parse()?
            };
            let sock = plut::bind(local, &tuning)?;
            let s = plut::send(&sock, addr, &Zero, 0, len, &cfg, &tuning, &progress)?;
            let x = s.sender.unwrap_or_default();
            println!(
                "{{\"end\":\"send\",\"bytes\":{len},\"mds\":{mds},\"goodput_bps\":{:.0},\"elapsed_s\":{:.3},\"cpu_s\":{:.3},\"datagrams\":{},\"retransmits\":{},\"timeouts\":{},\"batches\":{}}}",
                len as f64 * 8.0 / s.elapsed_s,
                s.elapsed_s,
                s.cpu_s,
                x.datagrams_sent,
                x.retransmits,
                x.timeouts,
                s.send_batches
            );
        }
        _ => return Err(usage.into()),
    }
    Ok(())
}
