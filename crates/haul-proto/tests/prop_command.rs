//! Property tests of the control-command parser: it never panics on anything a client can send,
//! and every command haul can write parses back to itself.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use haul_proto::command::{ProtLevel, Restart, TransferMode, TransferType};
use haul_proto::{Command, RangeSet};
use proptest::prelude::*;

/// Every verb `Command::parse` knows, including the X-prefixed RFC 775 aliases.
const KNOWN_VERBS: &[&str] = &[
    "USER", "PASS", "ACCT", "CWD", "XCWD", "CDUP", "XCUP", "QUIT", "REIN", "PORT", "EPRT", "PASV",
    "EPSV", "SPAS", "SPOR", "TYPE", "MODE", "STRU", "RETR", "STOR", "APPE", "ERET", "ESTO", "ALLO",
    "REST", "RNFR", "RNTO", "ABOR", "DELE", "RMD", "XRMD", "MKD", "XMKD", "PWD", "XPWD", "LIST",
    "NLST", "MLSD", "MLST", "SIZE", "MDTM", "SITE", "SYST", "STAT", "HELP", "NOOP", "FEAT", "OPTS",
    "AUTH", "PBSZ", "PROT", "SBUF", "DCAU", "CKSM",
];

/// Free text as a client may send it: printable, any script, no line terminators.
fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-zA-Z0-9 ._/~-]{1,40}", "\\PC{1,24}", "/[^\r\n]{0,30}",]
}

/// A path whose first character survives `LIST`'s flag and whitespace stripping.
fn list_path() -> impl Strategy<Value = String> {
    text().prop_filter("no leading flag or whitespace", |s| {
        s.chars()
            .next()
            .is_some_and(|c| c != '-' && !c.is_whitespace())
    })
}

fn v4() -> impl Strategy<Value = SocketAddr> {
    (any::<u32>(), any::<u16>())
        .prop_map(|(ip, port)| SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port))
}

fn any_ip() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        v4(),
        (any::<u128>(), any::<u16>())
            .prop_map(|(ip, port)| SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port)),
    ]
}

/// A non-empty restart range list (an empty one has no wire form as a REST argument).
fn ranges() -> impl Strategy<Value = RangeSet> {
    prop::collection::vec((any::<u64>(), 1u64..1 << 20), 1..6)
        .prop_map(|v| {
            let mut r = RangeSet::new();
            for (a, len) in v {
                r.insert(a, a.saturating_add(len));
            }
            r
        })
        .prop_filter("non-empty", |r| !r.is_empty())
}

fn opt_path() -> impl Strategy<Value = Option<String>> {
    prop::option::of(list_path())
}

fn unknown_verb() -> impl Strategy<Value = String> {
    "[A-Z]{1,8}".prop_filter("not a known verb", |v| !KNOWN_VERBS.contains(&v.as_str()))
}

/// Every `Command` variant with arguments a real client or server would write.
fn command() -> impl Strategy<Value = Command> {
    let simple = prop_oneof![
        Just(Command::Cdup),
        Just(Command::Quit),
        Just(Command::Rein),
        Just(Command::Pasv),
        Just(Command::Epsv),
        Just(Command::Spas),
        Just(Command::Abor),
        Just(Command::Pwd),
        Just(Command::Syst),
        Just(Command::Noop),
        Just(Command::Feat),
        Just(Command::Type(TransferType::Ascii)),
        Just(Command::Type(TransferType::Image)),
        Just(Command::Mode(TransferMode::Stream)),
        Just(Command::Mode(TransferMode::Extended)),
        Just(Command::Stru('F')),
        Just(Command::Prot(ProtLevel::Clear)),
        Just(Command::Prot(ProtLevel::Safe)),
        Just(Command::Prot(ProtLevel::Confidential)),
        Just(Command::Prot(ProtLevel::Private)),
    ];
    let with_text = prop_oneof![
        text().prop_map(Command::User),
        prop_oneof![Just(String::new()), text()].prop_map(Command::Pass),
        text().prop_map(Command::Acct),
        text().prop_map(Command::Cwd),
        text().prop_map(Command::Retr),
        text().prop_map(Command::Stor),
        text().prop_map(Command::Appe),
        text().prop_map(Command::Rnfr),
        text().prop_map(Command::Rnto),
        text().prop_map(Command::Dele),
        text().prop_map(Command::Rmd),
        text().prop_map(Command::Mkd),
        text().prop_map(Command::Size),
        text().prop_map(Command::Mdtm),
        text().prop_map(Command::Site),
        opt_path().prop_map(Command::List),
        opt_path().prop_map(Command::Nlst),
        opt_path().prop_map(Command::Mlsd),
        opt_path().prop_map(Command::Mlst),
        opt_path().prop_map(Command::Stat),
        opt_path().prop_map(Command::Help),
    ];
    let structured = prop_oneof![
        v4().prop_map(Command::Port),
        any_ip().prop_map(Command::Eprt),
        prop::collection::vec(v4(), 1..5).prop_map(Command::Spor),
        (any::<u64>(), any::<u64>(), text()).prop_map(|(offset, length, path)| Command::Eret {
            offset,
            length,
            path
        }),
        (any::<u64>(), text()).prop_map(|(offset, path)| Command::Esto { offset, path }),
        any::<u64>().prop_map(Command::Allo),
        any::<u64>().prop_map(|n| Command::Rest(Restart::Offset(n))),
        ranges().prop_map(|r| Command::Rest(Restart::Ranges(r))),
        (
            "[A-Z]{1,8}",
            prop_oneof![Just(String::new()), "[^\r\n]{1,30}"]
        )
            .prop_map(|(command, options)| Command::Opts { command, options }),
        prop_oneof![Just("TLS"), Just("SSL"), Just("GSSAPI"), Just("TLS-C")]
            .prop_map(|m| Command::Auth(m.into())),
        any::<u64>().prop_map(Command::Pbsz),
        any::<u64>().prop_map(Command::Sbuf),
        prop_oneof![
            Just("N".to_string()),
            Just("A".to_string()),
            "S /O=Grid/CN=[a-z]{1,12}".prop_map(String::from),
        ]
        .prop_map(Command::Dcau),
        (
            "[A-Z0-9]{1,10}",
            any::<u64>(),
            prop::option::of(any::<u64>()),
            text()
        )
            .prop_map(|(algorithm, offset, length, path)| Command::Cksm {
                algorithm,
                offset,
                length,
                path
            }),
        (
            unknown_verb(),
            prop_oneof![Just(String::new()), "[^\r\n]{1,30}"]
        )
            .prop_map(|(verb, arg)| Command::Unknown { verb, arg }),
    ];
    prop_oneof![simple, with_text, structured]
}

/// Lines a hostile or broken client may send: random text, and known verbs with random arguments.
fn hostile_line() -> impl Strategy<Value = String> {
    let verb = prop::sample::select(KNOWN_VERBS)
        .prop_flat_map(|v| prop_oneof![Just(v.to_string()), Just(v.to_ascii_lowercase())]);
    let arg = prop_oneof![
        ".*",
        "\\PC*",
        "[0-9, -]{0,60}",
        "[0-9]{15,40}",
        "-?[0-9]{1,25}( -?[0-9]{1,25}){0,4}( .*)?",
        "[PA]?( {0,3}[0-9]{0,22}){0,3} {0,3}.*",
        "\\|[12]?\\|[0-9a-f:.]{0,40}\\|[0-9]{0,7}\\|?",
        "[0-9]{0,25}-[0-9]{0,25}(,[0-9]{0,25}-?[0-9]{0,25}){0,5}",
    ];
    prop_oneof![
        ".*",
        "[\\s\\S]{0,64}",
        (verb, "[ \t]{0,2}", arg).prop_map(|(v, sep, a)| format!("{v}{sep}{a}")),
    ]
}

proptest! {
    #[test]
    fn parse_never_panics(line in hostile_line()) {
        let _ = Command::parse(&line);
    }

    #[test]
    fn parse_never_panics_on_lossy_bytes(bytes in prop::collection::vec(any::<u8>(), 0..128)) {
        let _ = Command::parse(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn display_parse_round_trip(cmd in command()) {
        let wire = cmd.to_string();
        prop_assert!(!wire.contains(['\r', '\n']), "wire form {wire:?} has a line break");
        prop_assert_eq!(Command::parse(&wire), Ok(cmd), "wire form {:?}", wire);
    }

    #[test]
    fn verb_matches_wire_form(cmd in command()) {
        let wire = cmd.to_string();
        let first = wire.split(' ').next().unwrap_or("");
        prop_assert_eq!(first, cmd.verb());
    }
}
