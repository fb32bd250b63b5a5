//! TUN devices: creating one inside a namespace and non-blocking packet read / write.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

use crate::error::{Error, Result};
use crate::netns;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO_ECN: libc::c_uint = 0x08;
const TUN_F_USO4: libc::c_uint = 0x20;
const TUN_F_USO6: libc::c_uint = 0x40;

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// An open TUN device (layer 3, no packet information header).
#[derive(Debug)]
pub struct Tun {
    file: File,
    name: String,
    offload: bool,
}

impl Tun {
    /// Creates TUN device `name` inside namespace `ns`, non-blocking. With `offload`, every
    /// packet read or written carries a `virtio_net_hdr` ([`crate::gso`]) and the kernel may
    /// hand over TCP and UDP segmentation-offload packets of up to 64 KiB; when the kernel
    /// refuses the offloads the device is made without them ([`Tun::offload`] says which).
    pub fn create(ns: &str, name: &str, offload: bool) -> Result<Tun> {
        match Tun::open(ns, name, offload) {
            Err(e) if offload => {
                tracing::warn!("TUN {name} without segmentation offload: {e}");
                Tun::open(ns, name, false)
            }
            r => r,
        }
    }

    fn open(ns: &str, name: &str, offload: bool) -> Result<Tun> {
        if name.len() >= libc::IFNAMSIZ {
            return Err(Error::Config(format!(
                "interface name {name:?} is too long"
            )));
        }
        let what = format!("create TUN device {name} in namespace {ns}");
        let file = netns::enter(ns, || -> std::io::Result<File> {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open("/dev/net/tun")?;
            let mut req = IfReq {
                name: [0; libc::IFNAMSIZ],
                flags: IFF_TUN | IFF_NO_PI | if offload { IFF_VNET_HDR } else { 0 },
                _pad: [0; 22],
            };
            req.name[..name.len()].copy_from_slice(name.as_bytes());
            // SAFETY: TUNSETIFF reads and writes one struct ifreq, which `req` is.
            if unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF, &mut req) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if offload {
                set_offload(&file)?;
            }
            Ok(file)
        })?
        .map_err(|e| Error::sys(what, e))?;
        Ok(Tun {
            file,
            name: name.to_string(),
            offload,
        })
    }

    /// Whether packets carry a `virtio_net_hdr` and may be segmentation-offload packets.
    pub fn offload(&self) -> bool {
        self.offload
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The raw file descriptor (for polling).
    pub fn fd(&self) -> i32 {
        self.file.as_raw_fd()
    }

    /// Reads one packet; `Ok(None)` when none is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        match (&self.file).read(buf) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes one packet.
    pub fn send(&self, pkt: &[u8]) -> std::io::Result<()> {
        (&self.file).write(pkt).map(|_| ())
    }
}

/// Turns on checksum, TCP and (where the kernel has it, 6.2 on) UDP segmentation offload.
/// The kernel takes UDP's for both IP versions or neither; no IPv6 offload packet reaches the
/// forwarder, since the testbed's namespaces have IPv6 off.
fn set_offload(file: &File) -> std::io::Result<()> {
    let base = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO_ECN;
    for flags in [base | TUN_F_USO4 | TUN_F_USO6, base] {
        // SAFETY: TUNSETOFFLOAD takes its flags as the integer argument itself.
        if unsafe { libc::ioctl(file.as_raw_fd(), TUNSETOFFLOAD, flags as libc::c_ulong) } == 0 {
            return Ok(());
        }
    }
    Err(std::io::Error::last_os_error())
}
