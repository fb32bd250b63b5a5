use super::*;

fn rt(line: &str) -> Command {
    let c = Command::parse(line).unwrap();
    assert_eq!(
        Command::parse(&c.to_string()).unwrap(),
        c,
        "round trip of {line}"
    );
    c
}

#[test]
fn parses_core_commands() {
    assert_eq!(rt("USER anonymous"), Command::User("anonymous".into()));
    assert_eq!(rt("retr /a b/c.dat"), Command::Retr("/a b/c.dat".into()));
    assert_eq!(rt("TYPE I"), Command::Type(TransferType::Image));
    assert_eq!(rt("MODE E"), Command::Mode(TransferMode::Extended));
    assert_eq!(rt("PASV"), Command::Pasv);
    assert_eq!(
        rt("PORT 127,0,0,1,4,1"),
        Command::Port("127.0.0.1:1025".parse().unwrap())
    );
    assert_eq!(rt("REST 100"), Command::Rest(Restart::Offset(100)));
    assert_eq!(rt("LIST"), Command::List(None));
    assert_eq!(
        Command::parse("LIST -la dir").unwrap(),
        Command::List(Some("dir".into()))
    );
}

#[test]
fn parses_gridftp_extensions() {
    assert_eq!(
        rt("ERET P 10 20 /x y"),
        Command::Eret {
            offset: 10,
            length: 20,
            path: "/x y".into()
        }
    );
    assert_eq!(
        rt("ESTO A 5 /f"),
        Command::Esto {
            offset: 5,
            path: "/f".into()
        }
    );
    assert_eq!(
        rt("CKSM md5 0 -1 /f"),
        Command::Cksm {
            algorithm: "MD5".into(),
            offset: 0,
            length: None,
            path: "/f".into()
        }
    );
    assert_eq!(rt("SBUF 4194304"), Command::Sbuf(4194304));
    assert_eq!(
        rt("SPOR 127,0,0,1,4,1 127,0,0,1,4,2"),
        Command::Spor(vec![
            "127.0.0.1:1025".parse().unwrap(),
            "127.0.0.1:1026".parse().unwrap()
        ])
    );
    let c = rt("OPTS RETR Parallelism=4,4,4;");
    let Command::Opts { command, options } = c else {
        panic!()
    };
    assert_eq!(command, "RETR");
    assert_eq!(RetrOptions::parse(&options).unwrap().parallelism, Some(4));
    assert_eq!(
        rt("REST 0-100,200-300"),
        Command::Rest(Restart::Ranges(RangeSet::parse("0-100,200-300").unwrap()))
    );
}

#[test]
fn rejects_malformed() {
    assert_eq!(Command::parse(""), Err(CommandError::Empty));
    assert!(matches!(
        Command::parse("R3TR x"),
        Err(CommandError::BadVerb(_))
    ));
    assert_eq!(
        Command::parse("RETR"),
        Err(CommandError::MissingArgument("RETR"))
    );
    assert!(matches!(
        Command::parse("PORT 1,2,3"),
        Err(CommandError::BadArgument { .. })
    ));
    assert!(matches!(
        Command::parse("ERET P x 1 /f"),
        Err(CommandError::BadArgument { .. })
    ));
    assert!(matches!(
        Command::parse("CKSM MD5 0"),
        Err(CommandError::BadArgument { .. })
    ));
    assert!(RetrOptions::parse("Parallelism=0,0,0;").is_err());
    assert_eq!(
        Command::parse("XYZZY 1").unwrap(),
        Command::Unknown {
            verb: "XYZZY".into(),
            arg: "1".into()
        }
    );
}

#[test]
fn parses_the_globus_server_additions() {
    assert_eq!(rt("MLSR"), Command::Mlsr(None));
    assert_eq!(rt("mlsr ~/tree/"), Command::Mlsr(Some("~/tree/".into())));
    let t = ModTime::parse("20200102030405").unwrap();
    assert_eq!(
        rt("MFMT 20200102030405 /a b"),
        Command::Mfmt {
            time: t,
            path: "/a b".into()
        }
    );
    assert_eq!(
        Command::parse("MFMT 20200102030405.250 f").unwrap(),
        Command::Mfmt {
            time: t,
            path: "f".into()
        }
    );
    for bad in [
        "MFMT",
        "MFMT 20200102030405",
        "MFMT 2020010203040 f",
        "MFMT 20201302030405 f",
    ] {
        assert!(
            matches!(
                Command::parse(bad),
                Err(CommandError::BadArgument { .. } | CommandError::MissingArgument(_))
            ),
            "{bad} parsed"
        );
    }
}

#[test]
fn parses_site_subcommands() {
    let site = |s: &str| {
        let Command::Site(text) = rt(s) else {
            panic!("{s} is not SITE")
        };
        let c = SiteCommand::parse(&text).unwrap();
        assert_eq!(SiteCommand::parse(&c.to_string()).unwrap(), c, "{s}");
        c
    };
    assert_eq!(
        site("SITE CHMOD 0644 /d/f x"),
        SiteCommand::Chmod {
            mode: 0o644,
            path: "/d/f x".into()
        }
    );
    assert_eq!(
        site("site chgrp nogroup f"),
        SiteCommand::Chgrp {
            group: "nogroup".into(),
            path: "f".into()
        }
    );
    assert_eq!(
        site("SITE UTIME 20210102030405 ~/f"),
        SiteCommand::Utime {
            time: ModTime::parse("20210102030405").unwrap(),
            path: "~/f".into()
        }
    );
    assert_eq!(
        site("SITE SETDISKSTACK file"),
        SiteCommand::SetDiskStack("file".into())
    );
    assert_eq!(site("SITE WHOAMI"), SiteCommand::Whoami);
    assert_eq!(
        site("SITE CLIENTINFO scheme=ftp;"),
        SiteCommand::Other {
            sub: "CLIENTINFO".into(),
            arg: "scheme=ftp;".into()
        }
    );
    for bad in [
        "CHMOD 644",
        "CHMOD 999 f",
        "CHMOD 17777 f",
        "CHMOD rw f",
        "CHGRP g",
        "UTIME f 20210102030405",
        "UTIME 20210102030405",
        "SETDISKSTACK  ",
        "WHOAMI x",
        "",
    ] {
        assert!(SiteCommand::parse(bad).is_err(), "{bad:?} parsed");
    }
}
