//! `haul cp --transport plut` against `haul serve`, both as real binaries over loopback:
//! download and upload byte for byte and verified end to end, memory to memory, and a clear
//! error from a server asked for PLUT with bad parameters.
mod common;

use common::haul::*;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output};

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn plut_download_and_upload_are_exact_and_verified() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir(&root).unwrap();
    let data = random_bytes((40 << 20) + 777, 5);
    fs::write(root.join("f"), &data).unwrap();
    // Last written an hour ago: the server hashes it as it sends it and answers the CKSM
    // from that, which the client's own digest must match.
    settle(&root.join("f"));
    let s = serve(&root, &["--anonymous", "--anonymous-write"]);
    let hist = dir.path().join("h.sqlite");
    let dl = dir.path().join("dl");
    let out = cp(
        &[
            "--transport",
            "plut",
            "--json",
            &format!("ftp://{}/f", s.addr),
            dl.to_str().unwrap(),
        ],
        &hist,
    );
    assert!(out.status.success());
    assert!(fs::read(&dl).unwrap() == data, "download byte-exact");
    let j = json(&out);
    assert_eq!(j["verified_files"], 1);
    assert_eq!(j["transport"], "plut");
    let out = cp(
        &[
            "--transport",
            "plut",
            "--json",
            dl.to_str().unwrap(),
            &format!("ftp://{}/up", s.addr),
        ],
        &hist,
    );
    assert!(out.status.success());
    assert!(
        fs::read(root.join("up")).unwrap() == data,
        "upload byte-exact"
    );
    assert_eq!(json(&out)["verified_files"], 1);
    // Memory to memory: /dev/zero on the server to /dev/null here.
    let out = cp(
        &[
            "--transport",
            "plut",
            "--json",
            "--len",
            "30M",
            &format!("ftp://{}/dev/zero", s.addr),
            "/dev/null",
        ],
        &hist,
    );
    assert!(out.status.success());
    assert_eq!(json(&out)["bytes"], 30 << 20);
    // The history records the transport.
    let h = Command::new(env!("CARGO_BIN_EXE_haul"))
        .args(["history", "--json", "--history"])
        .arg(&hist)
        .output()
        .unwrap();
    assert!(h.status.success());
    assert!(
        String::from_utf8_lossy(&h.stdout).contains("\"transport\": \"plut\""),
        "history names the transport"
    );
}

/// Sends `line` on a raw control connection and returns the reply's first line.
fn say(c: &mut TcpStream, r: &mut BufReader<TcpStream>, line: &str) -> String {
    c.write_all(format!("{line}\r\n").as_bytes()).unwrap();
    let mut first = String::new();
    r.read_line(&mut first).unwrap();
    let mut l = first.clone();
    // Skip the rest of a multi-line reply.
    while l.len() > 3 && l.as_bytes()[3] == b'-' {
        l.clear();
        r.read_line(&mut l).unwrap();
        if l.starts_with(&first[..3]) && l.as_bytes().get(3) == Some(&b' ') {
            break;
        }
    }
    first.trim_end().to_string()
}

#[test]
fn server_advertises_plut_and_names_bad_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), &["--anonymous", "--anonymous-write"]);
    let mut c = TcpStream::connect(&s.addr).unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut greet = String::new();
    r.read_line(&mut greet).unwrap();
    c.write_all(b"FEAT\r\n").unwrap();
    let mut feat = String::new();
    loop {
        let mut l = String::new();
        if r.read_line(&mut l).unwrap() == 0 || l.starts_with("211 ") {
            break;
        }
        feat.push_str(&l);
    }
    assert!(feat.contains(" PLUT 1"), "FEAT lists PLUT: {feat}");
    assert!(say(&mut c, &mut r, "USER anonymous").starts_with("331"));
    assert!(say(&mut c, &mut r, "PASS x").starts_with("230"));
    assert!(
        say(&mut c, &mut r, "PLUT PASV 12 5").starts_with("503"),
        "PLUT before OPTS HAUL is refused"
    );
    let bad = say(&mut c, &mut r, "OPTS HAUL Transport=plut;Mds=10;");
    assert!(bad.starts_with("501") && bad.contains("Mds=10"), "{bad}");
    assert!(say(&mut c, &mut r, "OPTS HAUL Transport=plut;Mds=1472;").starts_with("200"));
    let bad = say(&mut c, &mut r, "PLUT PORT 10,9,8,7,4,1 ab");
    assert!(
        bad.starts_with("501") && bad.contains("not the control connection"),
        "{bad}"
    );
    assert!(say(&mut c, &mut r, "PLUT PASV zz 5").starts_with("501"));
    assert!(
        say(&mut c, &mut r, "RETR nothing").starts_with("425"),
        "RETR without a flow"
    );
    assert!(say(&mut c, &mut r, "PLUT PASV 1f 5").starts_with("227"));
    let mut rest = Vec::new();
    let _ = c.write_all(b"QUIT\r\n");
    let _ = r.read_to_end(&mut rest);
}
