//! Property tests of the control-command parser: it never panics on anything a client can send,
//! and every command haul can write parses back to itself.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use haul_proto::command::{ModTime, ProtLevel, Restart, SiteCommand, TransferMode, TransferType};
use haul_proto::{Command, RangeSet};
use proptest::prelude::*;

/// Every verb `Command::parse` knows, including the X-prefixed RFC 775 aliases.
const KNOWN_VERBS: &[&str] = &[
    "USER", "PASS", "ACCT", "CWD", "XCWD", "CDUP", "XCUP", "QUIT", "REIN", "PORT", "EPRT", "PASV",
    "EPSV", "SPAS", "SPOR", "TYPE", "MODE", "STRU", "RETR", "STOR", "APPE", "ERET", "ESTO", "ALLO",
    "REST", "RNFR", "RNTO", "ABOR", "DELE", "RMD", "XRMD", "MKD", "XMKD", "PWD", "XPWD", "LIST",
    "NLST", "MLSD", "MLST", "SIZE", "MDTM", "SITE", "SYST", "STAT", "HELP", "NOOP", "FEAT", "OPTS",
    "AUTH", "PBSZ", "PROT", "SBUF", "DCAU", "CKSM", "MLSR", "MFMT",
];

/// Every `SITE` subcommand `SiteCommand::parse` types.
const KNOWN_SITE: &[&str] = &["CHMOD", "CHGRP", "UTIME", "SETDISKSTACK", "WHOAMI"];

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

/// A time of years 0–9999, as `MFMT` and `SITE UTIME` carry it.
fn mod_time() -> impl Strategy<Value = ModTime> {
    // 0000-01-01 to 9999-12-31 23:59:59 in Unix seconds.
    (-62_167_219_200i64..=253_402_300_799).prop_map(ModTime::from_unix)
}

/// Every `SiteCommand` with arguments a real client would write.
fn site_command() -> impl Strategy<Value = SiteCommand> {
    let word = "[A-Za-z0-9_.-]{1,16}";
    prop_oneof![
        (0u32..=0o7777, text()).prop_map(|(mode, path)| SiteCommand::Chmod { mode, path }),
        (word, text()).prop_map(|(group, path)| SiteCommand::Chgrp { group, path }),
        (mod_time(), text()).prop_map(|(time, path)| SiteCommand::Utime { time, path }),
        "[a-z0-9_,:;=]{1,24}".prop_map(SiteCommand::SetDiskStack),
        Just(SiteCommand::Whoami),
        (
            "[A-Z]{1,12}".prop_filter("not typed", |s| !KNOWN_SITE.contains(&s.as_str())),
            prop_oneof![Just(String::new()), "[^\r\n]{1,30}"]
        )
            .prop_map(|(sub, arg)| SiteCommand::Other { sub, arg }),
    ]
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
        opt_path().prop_map(Command::Mlsr),
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
        (mod_time(), text()).prop_map(|(time, path)| Command::Mfmt { time, path }),
        site_command().prop_map(|c| Command::Site(c.to_string())),
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

/// One of `words`, upper- or lower-cased.
fn any_case(words: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::sample::select(words)
        .prop_flat_map(|v| prop_oneof![Just(v.to_string()), Just(v.to_ascii_lowercase())])
}

/// Lines a hostile or broken client may send: random text, and known verbs with random arguments.
fn hostile_line() -> impl Strategy<Value = String> {
    let verb = any_case(KNOWN_VERBS);
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

    #[test]
    fn site_parse_never_panics_and_writes_back_what_it_read(text in hostile_site_text()) {
        if let Ok(c) = SiteCommand::parse(&text) {
            prop_assert_eq!(SiteCommand::parse(&c.to_string()), Ok(c), "from {:?}", text);
        }
    }

    #[test]
    fn site_display_parse_round_trip(cmd in site_command()) {
        let wire = cmd.to_string();
        prop_assert!(!wire.contains(['\r', '\n']), "wire form {wire:?} has a line break");
        prop_assert_eq!(SiteCommand::parse(&wire), Ok(cmd.clone()), "wire form {:?}", wire);
        let line = format!("SITE {wire}");
        let Ok(Command::Site(text)) = Command::parse(&line) else {
            return Err(TestCaseError::fail(format!("{line:?} is not a SITE command")));
        };
        prop_assert_eq!(SiteCommand::parse(&text), Ok(cmd));
    }

    #[test]
    fn mod_time_round_trips(t in mod_time()) {
        let wire = t.to_string();
        prop_assert_eq!(wire.len(), 14);
        prop_assert_eq!(ModTime::parse(&wire), Ok(t));
        prop_assert_eq!(ModTime::from_unix(t.unix_seconds()), t);
    }
}

/// `SITE` texts a hostile client may send: typed subcommands with random arguments.
fn hostile_site_text() -> impl Strategy<Value = String> {
    let sub = any_case(KNOWN_SITE);
    let arg = prop_oneof![
        ".*",
        "\\PC*",
        "[0-9]{0,20}( .*)?",
        "[0-9]{14}(\\.[0-9]{0,5})?( .*)?",
        "[0-7]{0,6} .*",
    ];
    prop_oneof![
        ".*",
        (sub, " {0,2}", arg).prop_map(|(v, sep, a)| format!("{v}{sep}{a}")),
    ]
}
