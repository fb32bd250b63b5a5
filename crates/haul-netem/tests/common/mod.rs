//! Shared helpers of the namespace tests: skip without root, serialize timing-sensitive tests.

#![allow(dead_code)]

use std::sync::{Mutex, MutexGuard};

use haul_netem::{netns, Options, Testbed, Topology};

static SERIAL: Mutex<()> = Mutex::new(());

/// Holds the lock that keeps measurement tests from sharing the 2 cores.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Brings `topo` up under `prefix` with model seed 1, or prints why it cannot and returns `None`.
pub fn testbed(prefix: &str, topo: &Topology) -> Option<Testbed> {
    testbed_with(prefix, topo, true)
}

/// [`testbed`] with segmentation offload on the TUN devices on or off.
pub fn testbed_with(prefix: &str, topo: &Topology, offload: bool) -> Option<Testbed> {
    if let Err(e) = netns::available() {
        eprintln!("skipping: network namespaces unavailable (need root and iproute2): {e}");
        return None;
    }
    let opts = Options {
        prefix: prefix.into(),
        seed: 1,
        offload,
    };
    Some(Testbed::up(topo, opts).expect("testbed up"))
}

/// Forces a socket's receive buffer to `bytes` (root may exceed rmem_max).
pub fn force_rcvbuf(fd: i32, bytes: i32) {
    // SAFETY: setsockopt with a valid int option value.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &bytes as *const i32 as *const libc::c_void,
            4,
        )
    };
    assert_eq!(r, 0, "SO_RCVBUFFORCE: {}", std::io::Error::last_os_error());
}

/// Sleeps (then spins) until `deadline`.
pub fn wait_until(deadline: std::time::Instant) {
    let now = std::time::Instant::now();
    if deadline > now + std::time::Duration::from_micros(200) {
        std::thread::sleep(deadline - now - std::time::Duration::from_micros(100));
    }
    while std::time::Instant::now() < deadline {
        std::hint::spin_loop();
    }
}
