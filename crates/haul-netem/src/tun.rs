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
}

impl Tun {
    /// Creates TUN device `name` inside namespace `ns`, non-blocking.
    pub fn create(ns: &str, name: &str) -> Result<Tun> {
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
                flags: IFF_TUN | IFF_NO_PI,
                _pad: [0; 22],
            };
            req.name[..name.len()].copy_from_slice(name.as_bytes());
            // SAFETY: TUNSETIFF reads and writes one struct ifreq, which `req` is.
            if unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF, &mut req) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(file)
        })?
        .map_err(|e| Error::sys(what, e))?;
        Ok(Tun {
            file,
            name: name.to_string(),
        })
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
