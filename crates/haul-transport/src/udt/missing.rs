//! The UDT API in a build without UDT4: the types exist, and every constructor fails with
//! [`unavailable`](super::unavailable)'s error, so no value of them is ever made.

use std::convert::Infallible;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::{unavailable, Options, Perf};

/// A listening UDT socket (never made in this build).
pub struct UdtListener(Infallible);

impl UdtListener {
    /// Fails: this build has no UDT4.
    pub fn bind(_addr: SocketAddr, _o: &Options) -> io::Result<UdtListener> {
        Err(unavailable())
    }

    /// Unreachable in this build.
    pub fn local_addr(&self) -> SocketAddr {
        match self.0 {}
    }

    /// Unreachable in this build.
    pub fn accept_timeout(&self, _wait: Duration) -> io::Result<(UdtStream, SocketAddr)> {
        match self.0 {}
    }
}

/// One connected UDT socket (never made in this build).
pub struct UdtStream(Infallible);

impl UdtStream {
    /// Fails: this build has no UDT4.
    pub fn connect(_r: SocketAddr, _l: Option<IpAddr>, _o: &Options) -> io::Result<UdtStream> {
        Err(unavailable())
    }

    /// Unreachable in this build.
    pub fn set_read_timeout(&self, _t: Option<Duration>) -> io::Result<()> {
        match self.0 {}
    }

    /// Unreachable in this build.
    pub fn set_write_timeout(&self, _t: Option<Duration>) -> io::Result<()> {
        match self.0 {}
    }

    /// Unreachable in this build.
    pub fn close(&mut self) -> io::Result<()> {
        match self.0 {}
    }

    /// Unreachable in this build.
    pub fn cutter(&self) -> Cutter {
        match self.0 {}
    }

    /// Unreachable in this build.
    pub fn perfmon(&self) -> Option<Perf> {
        match self.0 {}
    }
}

impl Read for UdtStream {
    fn read(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
        match self.0 {}
    }
}

impl Write for UdtStream {
    fn write(&mut self, _buf: &[u8]) -> io::Result<usize> {
        match self.0 {}
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.0 {}
    }
}

/// Ends a UDT connection (never made in this build).
#[derive(Debug)]
pub struct Cutter(Infallible);

impl Cutter {
    /// Unreachable in this build.
    pub fn cut(&self) {
        match self.0 {}
    }
}
