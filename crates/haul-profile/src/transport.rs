//! The profiler's data channels: [`haul_transport::channel`], re-exported, the one
//! measurement-channel layer the copy path's crate also holds. [`for_kind`] returns this crate's
//! error, and a [`ChannelError`] becomes a [`ProfileError`] naming the `haul profile` flag of
//! the setting refused ([`flag`]). Channels take [`ChannelParams`], built from θ by
//! [`ProfileParams::channel`](crate::ProfileParams::channel).

pub use haul_transport::channel::{
    test_block, udt_available, Channel, ChannelError, ChannelParams, Connector, Listener, Perf,
    Plut, Recv, Setting, Tcp, Udp, Udt, POLL,
};

use haul_transport::channel;

use crate::params::TransportKind;
use crate::{ProfileError, Result};

/// The transport for `kind`, or a clear error when it is not available in this build.
pub fn for_kind(kind: TransportKind) -> Result<Box<dyn Connector>> {
    Ok(channel::for_kind(kind)?)
}

/// The `haul profile` flag (or θ field) that sets `s`.
pub fn flag(s: Setting) -> &'static str {
    match s {
        Setting::Buffer => "-w",
        Setting::Packet => "-M",
        Setting::Congestion => "--congestion",
        Setting::Mss => "--mss",
        Setting::Pacing => "--pacing",
        Setting::PlutSession => "plut.session",
        Setting::PlutInitialRate => "--plut-initial-rate",
        Setting::PlutMaxRate => "--plut-max-rate",
        Setting::Plut => "--plut-*",
    }
}

impl From<ChannelError> for ProfileError {
    fn from(e: ChannelError) -> ProfileError {
        match e {
            ChannelError::Io { what, source } => ProfileError::Io { what, source },
            ChannelError::Setting { setting, reason } => ProfileError::param(flag(setting), reason),
            ChannelError::Unavailable { kind, reason } => {
                ProfileError::Unavailable(kind.to_string(), reason)
            }
            ChannelError::Plut { channel, source } => ProfileError::Plut { channel, source },
            ChannelError::Usage(m) => ProfileError::Protocol(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ProfileParams;

    /// A refused setting still names the flag, as when the channels were this crate's.
    #[test]
    fn channel_errors_name_the_flag() {
        let plut = |f: fn(&mut ProfileParams)| {
            let mut p = ProfileParams {
                transport: TransportKind::Plut,
                ..Default::default()
            };
            p.plut.session = Some(1);
            f(&mut p);
            Plut.init(&p.channel()).map_err(ProfileError::from)
        };
        assert!(plut(|_| {}).is_ok());
        let msg = |r: Result<()>| r.unwrap_err().to_string();
        assert!(msg(plut(|p| p.packet = Some(100))).contains("bad parameter -M: PLUT datagram"));
        assert!(msg(plut(|p| p.plut.max_rate = Some(0))).contains("--plut-max-rate"));
        assert!(msg(plut(|p| p.plut.initial_rate = Some(0))).contains("--plut-initial-rate"));
        assert!(msg(plut(|p| p.plut.session = None)).contains("plut.session"));
        let udp = ProfileParams {
            transport: TransportKind::Udp,
            packet: Some(8),
            ..Default::default()
        };
        let e = ProfileError::from(Udp.init(&udp.channel()).unwrap_err());
        assert!(
            matches!(e, ProfileError::Param { ref name, .. } if name == "-M"),
            "{e}"
        );
    }

    #[test]
    fn unavailable_and_usage_errors_keep_their_messages() {
        let e = ProfileError::from(ChannelError::Unavailable {
            kind: TransportKind::Udt,
            reason: "no udt.h".into(),
        });
        assert_eq!(e.to_string(), "transport udt is not available: no udt.h");
        let e = ProfileError::from(ChannelError::Usage("UDP port 9 accepted twice".into()));
        assert_eq!(e.to_string(), "control channel: UDP port 9 accepted twice");
    }
}
