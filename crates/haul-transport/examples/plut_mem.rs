//! Loopback memory-to-memory PLUT benchmark: `/dev/zero` to `/dev/null` through real UDP
//! sockets, sender and receiver on their own threads. Prints goodput and CPU seconds per GB of
//! each end. `cargo run --release -p haul-transport --example plut_mem -- [BYTES] [MDS] [RATE_BPS]`

use haul_transport::io::{Null, Zero};
use haul_transport::mode_e::Progress;
use haul_transport::plut::{self, Tuning};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let len: u64 = args.next().map_or(Ok(4 << 30), |a| a.parse())?;
    let mds: usize = args.next().map_or(Ok(plut::MAX_MDS), |a| a.parse())?;
    let rate: f64 = args
        .next()
        .map_or(Ok(2.5e9), |a| a.parse::<f64>().map(|b| b / 8.0))?;
    let tuning = Tuning::default();
    let cfg = plut::config(0x5eed, mds, rate, 96 << 20);
    let rx = plut::bind("127.0.0.1:0".parse()?, &tuning)?;
    let tx = plut::bind("127.0.0.1:0".parse()?, &tuning)?;
    let addr = rx.local_addr()?;
    let (pr, ps) = (Progress::default(), Progress::default());
    let start = std::time::Instant::now();
    let (s, r) = std::thread::scope(|sc| {
        let r = sc.spawn(|| plut::receive(&rx, &Null, 0, len, &cfg, &tuning, &pr));
        let s = sc.spawn(|| plut::send(&tx, addr, &Zero, 0, len, &cfg, &tuning, &ps));
        (s.join(), r.join())
    });
    let wall = start.elapsed().as_secs_f64();
    let s = s.map_err(|_| "sender panicked")??;
    let r = r.map_err(|_| "receiver panicked")??;
    let gb = len as f64 / 1e9;
    println!(
        "{{\"bytes\":{len},\"mds\":{mds},\"goodput_bps\":{:.0},\"sender_elapsed_s\":{:.3},\"wall_s\":{wall:.3},\"sender_cpu_s_per_gb\":{:.3},\"receiver_cpu_s_per_gb\":{:.3},\"retransmits\":{},\"datagrams\":{},\"batches\":{}}}",
        len as f64 * 8.0 / s.elapsed_s,
        s.elapsed_s,
        s.cpu_s / gb,
        r.cpu_s / gb,
        s.sender.map_or(0, |x| x.retransmits),
        s.sender.map_or(0, |x| x.datagrams_sent),
        s.send_batches,
    );
    Ok(())
}
