use clap::{CommandFactory, Parser};

use super::*;

/// `haul serve`'s flags alone, parsed as on its command line.
#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    opts: Opts,
}

fn flags(words: &[&str]) -> Opts {
    Flags::try_parse_from(std::iter::once("serve").chain(words.iter().copied()))
        .expect("flags parse")
        .opts
}

fn keys(text: &str) -> Result<Opts, String> {
    toml::from_str(text).map_err(|e| e.to_string())
}

const EVERY_KEY: &str = r#"
root = "/data"
listen = "0.0.0.0:2811"
anonymous = true
anonymous_write = true
sendfile = true
users = "/etc/haul/users"
tls_cert = "/etc/haul/cert.pem"
tls_key = "/etc/haul/key.pem"
require_tls = true
max_sessions = 10
max_sessions_per_ip = 5
max_sessions_per_user = 4
login_timeout = 11
idle_timeout = 12
data_timeout = 13
max_parallelism = 14
data_ports = "50000-50099"
drain_timeout = 15
metrics = "127.0.0.1:9101"
metrics_labels = 7
history = "/var/lib/haul/history.sqlite"
no_history = true

[relay]
allow = ["dtn2.example.org:2811"]
sessions = 3
memory = "64M"
"#;

#[test]
fn every_key_is_read() {
    let o = keys(EVERY_KEY).unwrap();
    let s = Settings::derive(o, Some(Path::new("/etc/haul/serve.toml"))).unwrap();
    let c = &s.server;
    assert_eq!(c.root, PathBuf::from("/data"));
    assert_eq!(c.listen, "0.0.0.0:2811".parse().unwrap());
    assert!(c.anonymous && c.anonymous_write && c.sendfile && c.require_tls);
    assert_eq!(c.users.as_deref(), Some(Path::new("/etc/haul/users")));
    assert_eq!(
        c.tls,
        Some(("/etc/haul/cert.pem".into(), "/etc/haul/key.pem".into()))
    );
    assert_eq!(
        (
            c.max_sessions,
            c.max_sessions_per_ip,
            c.max_sessions_per_user
        ),
        (10, 5, 4)
    );
    assert_eq!(
        (c.login_timeout, c.idle_timeout, c.data_timeout),
        (
            Duration::from_secs(11),
            Duration::from_secs(12),
            Duration::from_secs(13)
        )
    );
    assert_eq!(c.max_parallelism, 14);
    assert_eq!(c.data_ports, Some((50000, 50099)));
    assert_eq!(s.drain_timeout, Duration::from_secs(15));
    assert_eq!(s.metrics, Some("127.0.0.1:9101".parse().unwrap()));
    assert_eq!(s.metrics_labels, 7);
    // no_history wins over history.
    assert_eq!(s.history, None);
    let (_, table) = &s.relay;
    let (_, from) = table.as_ref().expect("the [relay] table");
    assert_eq!(from, Path::new("/etc/haul/serve.toml"));
}

#[test]
fn every_flag_is_a_key() {
    let mut seen = 0;
    for arg in Flags::command().get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        let key = long.replace('-', "_");
        let text = match key.strip_prefix("relay_") {
            // The relay config file's own format is the [relay] table.
            Some("config") => continue,
            Some(k) => format!("[relay]\n{k} = 0\n"),
            None => format!("{key} = 0\n"),
        };
        // A value of the wrong type is fine here; an unknown key is not.
        if let Err(e) = keys(&text) {
            assert!(!e.contains("unknown field"), "--{long} is no key: {e}");
        }
        seen += 1;
    }
    assert!(seen >= 30, "only {seen} flags seen");
}

#[test]
fn an_unknown_key_names_the_key_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("serve.toml");
    std::fs::write(&path, "root = \"/data\"\nmax_sesions = 3\n").unwrap();
    let e = format!("{:#}", read(&path).unwrap_err());
    assert!(e.contains("max_sesions"), "{e}");
    assert!(e.contains(&path.display().to_string()), "{e}");
    assert!(e.contains("line 2"), "{e}");
}

#[test]
fn flags_override_keys() {
    let file =
        keys("root = \"/data\"\nmax_sessions = 10\nlisten = \"0.0.0.0:2811\"\nanonymous = true\n")
            .unwrap();
    let given = flags(&[
        "--max-sessions",
        "3",
        "--root",
        "/other",
        "--drain-timeout",
        "5",
    ]);
    let s = Settings::derive(merge(given, file).unwrap(), None).unwrap();
    assert_eq!(s.server.max_sessions, 3);
    assert_eq!(s.server.root, PathBuf::from("/other"));
    // Keys without a flag stay.
    assert_eq!(s.server.listen, "0.0.0.0:2811".parse().unwrap());
    assert!(s.server.anonymous);
    assert_eq!(s.drain_timeout, Duration::from_secs(5));
}

#[test]
fn defaults_without_a_file() {
    let s = Settings::derive(flags(&["--root", "/d"]), None).unwrap();
    assert_eq!(s.server.max_sessions, 64);
    assert_eq!(s.server.listen, "127.0.0.1:2811".parse().unwrap());
    assert_eq!(s.drain_timeout, Duration::from_secs(60));
    assert_eq!(s.metrics, None);
    assert_eq!(s.server.data_ports, None);
}

#[test]
fn contradictions_are_refused() {
    for (words, why) in [
        (&["--anonymous-write"][..], "--anonymous"),
        (&["--tls-cert", "c.pem"][..], "--tls-key"),
        (&["--max-parallelism", "2000"][..], "1 to 1024"),
    ] {
        let mut all = vec!["--root", "/d"];
        all.extend_from_slice(words);
        let e = Settings::derive(flags(&all), None).unwrap_err().to_string();
        assert!(e.contains(why), "{words:?}: {e}");
    }
    assert!(Settings::derive(Opts::default(), None)
        .unwrap_err()
        .to_string()
        .contains("--root"));
    for bad in ["0-10", "10-5", "x-y", "100"] {
        assert!(parse_ports(bad).is_err(), "{bad}");
    }
    assert!(keys("data_ports = \"9-3\"").is_err());
}

#[test]
fn the_example_file_parses_and_is_the_one_in_the_docs() {
    let example = include_str!("../../../../../../dist/haul-serve.toml");
    let o = keys(example).unwrap();
    Settings::derive(o, None).unwrap();
    let docs = include_str!("../../../../../../docs/serve.md");
    assert!(
        docs.contains(example),
        "docs/serve.md does not hold dist/haul-serve.toml verbatim"
    );
}

#[test]
fn probes_are_off_by_default_and_read_from_keys_and_flags() {
    let s = Settings::derive(keys("root = \"/data\"\n").unwrap(), None).unwrap();
    assert!(s.probes.peers.is_empty(), "no probes unless asked");
    assert_eq!(s.probes.interval, Duration::from_secs(3600));
    assert_eq!(s.probes.bytes, 64 << 20);
    let file = keys(
        "root = \"/data\"\nprobe = [\"dtn1:2811\", \"dtn2:2811\"]\nprobe_interval = \"30m\"\n\
         probe_bytes = \"256MiB\"\n",
    )
    .unwrap();
    let s = Settings::derive(merge(flags(&[]), file).unwrap(), None).unwrap();
    assert_eq!(s.probes.peers, ["dtn1:2811", "dtn2:2811"]);
    assert_eq!(s.probes.interval, Duration::from_secs(1800));
    assert_eq!(s.probes.bytes, 256 << 20);
    let given = flags(&[
        "--root",
        "/d",
        "--probe",
        "a:1,b:2",
        "--probe-bytes",
        "1MiB",
    ]);
    let s = Settings::derive(given, None).unwrap();
    assert_eq!((s.probes.peers.len(), s.probes.bytes), (2, 1 << 20));
    for bad in [
        &["--probe-interval", "500ms"][..],
        &["--probe-bytes", "64K"],
        &["--probe", "a:1", "--no-history"],
    ] {
        let given = flags(&[&["--root", "/d"][..], bad].concat());
        assert!(Settings::derive(given, None).is_err(), "{bad:?}");
    }
}
