//! `haul plan` and `haul send` end to end, as real binaries against `haul serve` (and, when it is
//! installed, `globus-gridftp-server`): trees downloaded and uploaded byte-identical and
//! verified, probes within a budget recorded in the history and read by the next plan, requests
//! that cannot be met (deadline, target rate, encryption) refused with exit code 8 before
//! anything moves, and request-file and transport errors that name what is wrong.
mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::globus::*;
use common::haul::*;
use serde_json::{json, Value};

/// The exit code of a request that cannot be met.
const REFUSED: i32 = 8;
/// Files in [`tree`] without its big file.
const SMALL_FILES: u64 = 31;

/// A served tree ([`tree`]) with a history file beside it.
struct Fixture {
    dir: tempfile::TempDir,
    tree: PathBuf,
    hist: PathBuf,
    src: String,
    srv: Serve,
}

/// Serves a fresh [`tree`] (with its big file when `big`) from `haul serve --anonymous`.
fn fixture(big: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let tree = tree(&root, big);
    let srv = serve(&root, &["--anonymous"]);
    Fixture {
        hist: dir.path().join("h.sqlite"),
        src: format!("ftp://{}/tree", srv.addr),
        tree,
        dir,
        srv,
    }
}

/// Runs `haul ARGS --history HIST`, echoing its output for failure diagnosis.
fn haul(args: &[&str], hist: &Path) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_haul"))
        .args(args)
        .arg("--history")
        .arg(hist)
        .output()
        .expect("run haul");
    eprintln!("haul {args:?}: {}\n{}", out.status, stderr(&out));
    out
}

/// `haul SUB SRC DST --json EXTRA`, with its JSON (null when stdout is not JSON).
fn run_json(sub: &str, src: &str, dst: &str, hist: &Path, extra: &[&str]) -> (Output, Value) {
    let mut args = vec![sub, src, dst, "--json"];
    args.extend(extra);
    let out = haul(&args, hist);
    let j = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, j)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `ROOT/tree`: 31 small files (one empty) in two directories and, with `big`, a 40 MiB file
/// of random bytes.
fn tree(root: &Path, big: bool) -> PathBuf {
    let t = root.join("tree");
    fs::create_dir_all(t.join("sub")).unwrap();
    fs::write(t.join("empty"), b"").unwrap();
    for i in 0..30u64 {
        let dir = if i % 3 == 0 { t.join("sub") } else { t.clone() };
        let data = random_bytes(i as usize * 997 + 1, i + 1);
        fs::write(dir.join(format!("f{i}.dat")), data).unwrap();
    }
    if big {
        fs::write(t.join("big.bin"), random_bytes(40 << 20, 99)).unwrap();
    }
    t
}

/// The files under `dir`, relative and sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<PathBuf>) {
        for e in fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Every file of `a` is in `b` with the same bytes, and `b` has no others.
fn assert_same_tree(a: &Path, b: &Path) {
    let (fa, fb) = (files(a), files(b));
    assert_eq!(
        fa,
        fb,
        "{} and {} hold different files",
        a.display(),
        b.display()
    );
    for f in fa {
        let same = fs::read(a.join(&f)).unwrap() == fs::read(b.join(&f)).unwrap();
        assert!(same, "{} differs", f.display());
    }
}

fn tree_bytes(t: &Path) -> u64 {
    files(t)
        .iter()
        .map(|f| fs::metadata(t.join(f)).unwrap().len())
        .sum()
}

/// A `haul send --json` that moved and verified `files` files.
fn assert_sent(out: &Output, j: &Value, files: u64) {
    assert!(out.status.success(), "{}\n{j:#}", stderr(out));
    assert_eq!(j["outcome"], "ok", "{j:#}");
    assert_eq!(j["transfer"]["files"], files, "{j:#}");
    assert_eq!(j["transfer"]["verified_files"], files, "{j:#}");
    assert!(j["transfer"]["checksum"].is_string(), "{j:#}");
    assert_eq!(j["chosen"]["verdict"], "chosen", "{j:#}");
    assert_eq!(
        j["chosen"]["transport"], j["transfer"]["transport"],
        "{j:#}"
    );
    for k in ["wait_s", "discover_s", "profile_s", "plan_s", "transfer_s"] {
        assert!(
            j["stages"][k].as_f64().is_some_and(|v| v >= 0.0),
            "stage {k}: {j:#}"
        );
    }
}

/// The history's records of `kind`, through `haul history --json`.
fn records(hist: &Path, kind: &str) -> Vec<Value> {
    let out = haul(
        &["history", "--json", "--limit", "1000", "--kind", kind],
        hist,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array().expect("a list of records").clone()
}

/// Where the plan's rate term for `transport` on the direct route came from.
fn rate_source(j: &Value, transport: &str) -> String {
    let zones = j["zones"].as_array().expect("zones");
    let zone = zones
        .iter()
        .find(|z| z["name"] == "transport")
        .expect("zone transport");
    let modules = zone["modules"].as_array().unwrap();
    let m = modules.iter().find(|m| m["id"] == transport);
    let m = m.unwrap_or_else(|| panic!("no module {transport}: {j:#}"));
    let terms = m["terms"].as_array().unwrap();
    let rate = terms
        .iter()
        .find(|t| t["name"] == "rate")
        .expect("a rate term");
    rate["source"].as_str().unwrap().to_string()
}

fn notes(j: &Value) -> Vec<String> {
    let n = j["notes"].as_array().expect("notes");
    n.iter().map(|n| n.as_str().unwrap().to_string()).collect()
}

/// A refusal: exit code 8, and `why` in `refused` (plan, or send with --json).
fn assert_refused(out: &Output, j: &Value, why: &str) {
    assert_eq!(out.status.code(), Some(REFUSED), "{}\n{j:#}", stderr(out));
    assert!(j["chosen"].is_null(), "{j:#}");
    let refused = j["refused"].as_str().unwrap_or_default();
    assert!(
        refused.contains(why),
        "refused {refused:?} does not mention {why}"
    );
}

#[test]
fn send_downloads_a_tree_verified_records_it_and_the_next_plan_reads_the_history() {
    let f = fixture(true);
    let dir = &f.dir;
    let (t, hist, src) = (f.tree.clone(), f.hist.clone(), f.src.clone());
    let a = dir.path().join("a");
    let (out, j) = run_json("send", &src, s(&a), &hist, &[]);
    assert_sent(&out, &j, SMALL_FILES + 1);
    assert_same_tree(&t, &a);
    assert_eq!(j["transfer"]["bytes"], tree_bytes(&t), "{j:#}");
    assert_eq!(j["request"]["files"], SMALL_FILES + 1, "{j:#}");
    assert_eq!(j["pair"], json!([f.srv.addr, "local"]), "{j:#}");
    assert_eq!(j["chosen"]["route"], "direct", "{j:#}");
    assert_eq!(
        j["chosen"]["transport"], "tcp",
        "ties go to the first transport: {j:#}"
    );
    // 40 MiB is less than four 32 MiB warm-ups per unknown transport: the default budget
    // probes nothing, and says so.
    assert_eq!(j["probes"], json!([]), "{j:#}");
    assert!(
        notes(&j)
            .iter()
            .any(|n| n.contains("too small to be worth probing")),
        "{j:#}"
    );
    assert!(records(&hist, "probe").is_empty());
    let sends = records(&hist, "send");
    assert_eq!(sends.len(), 1, "{sends:#?}");
    let plan = &sends[0]["params"]["extra"]["send"];
    assert_eq!(plan["transport"], "tcp", "{sends:#?}");
    assert_eq!(plan["route"], "direct", "{sends:#?}");
    assert_eq!(plan["solver"], "CPMS", "{sends:#?}");
    assert_eq!(sends[0]["files"], SMALL_FILES + 1);
    assert_eq!(sends[0]["bytes"], tree_bytes(&t));
    assert_eq!(sends[0]["outcome"], "ok");

    // The second send plans TCP from the first one's record.
    let b = dir.path().join("b");
    let (out, j) = run_json("send", &src, s(&b), &hist, &[]);
    assert_sent(&out, &j, SMALL_FILES + 1);
    assert_same_tree(&t, &b);
    let from = rate_source(&j, "tcp");
    assert!(from.starts_with("history:"), "tcp estimate from {from:?}");
    assert!(
        j["chosen"]["predicted_bps"]
            .as_f64()
            .is_some_and(|b| b > 0.0),
        "{j:#}"
    );
    assert!(
        j["chosen"]["predicted_s"].as_f64().is_some_and(|s| s > 0.0),
        "{j:#}"
    );
    let settings = j["settings"]["source"].as_str().unwrap();
    assert!(settings.contains("fastest recent transfer"), "{j:#}");
    assert_eq!(records(&hist, "send").len(), 2);
}

#[test]
fn a_profile_budget_probes_the_transports_without_history_memory_to_memory() {
    let f = fixture(true);
    let dir = &f.dir;
    let (t, hist, src) = (f.tree.clone(), f.hist.clone(), f.src.clone());
    let a = dir.path().join("a");
    let (out, j) = run_json("send", &src, s(&a), &hist, &["--profile-budget", "2s"]);
    assert_sent(&out, &j, SMALL_FILES + 1);
    assert_same_tree(&t, &a);
    let probes = j["probes"].as_array().expect("probes").clone();
    // PLUT's cost per file (32 files x 0.35 s) alone outlasts TCP's loopback estimate for the
    // whole tree: it is not probed, and the plan says why.
    let capped = notes(&j)
        .iter()
        .any(|n| n.starts_with("plut: not probed: its cost per file alone (32 files)"));
    assert!(capped, "{j:#}");
    assert!(!probes.iter().any(|p| p["transport"] == "plut"), "{j:#}");
    let p = probes
        .iter()
        .find(|p| p["transport"] == "tcp" && p["stage"] == "estimate");
    let p = p.unwrap_or_else(|| panic!("no tcp probe: {j:#}"));
    assert!(p["error"].is_null(), "{p:#}");
    assert!(p["bytes"].as_u64().unwrap() >= 32 << 20, "{p:#}");
    assert!(p["bps"].as_f64().unwrap() > 0.0, "{p:#}");
    let from = rate_source(&j, "tcp");
    assert!(from.starts_with("probe:"), "tcp estimate from {from:?}");
    let combos = j["combinations"].as_array().unwrap();
    assert!(
        combos
            .iter()
            .filter(|c| c["transport"] == "tcp")
            .all(|c| c["predicted_bps"].as_f64().is_some()),
        "{j:#}"
    );
    assert!(j["stages"]["profile_s"].as_f64().unwrap() > 0.0, "{j:#}");
    // Every probe is in the history, memory to memory.
    let recorded = records(&hist, "probe");
    assert_eq!(recorded.len(), probes.len(), "{recorded:#?}");
    for r in &recorded {
        assert!(
            r["source"].as_str().unwrap().ends_with("/dev/zero"),
            "{r:#}"
        );
        assert_eq!(r["destination"], "/dev/null", "{r:#}");
        assert_eq!(r["source_host"], f.srv.addr.as_str(), "{r:#}");
        assert_eq!(r["outcome"], "ok", "{r:#}");
    }
    assert!(
        recorded.iter().any(|r| r["params"]["transport"] == "tcp"),
        "{recorded:#?}"
    );
    assert_eq!(records(&hist, "send").len(), 1);
}

#[test]
fn send_uploads_a_local_tree_and_verifies_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir(&root).unwrap();
    let t = tree(&dir.path().join("local"), true);
    let srv = serve(&root, &["--anonymous", "--anonymous-write"]);
    let hist = dir.path().join("h.sqlite");
    let dst = format!("ftp://{}/dst", srv.addr);
    let (out, j) = run_json("send", s(&t), &dst, &hist, &[]);
    assert_sent(&out, &j, SMALL_FILES + 1);
    assert_same_tree(&t, &root.join("dst"));
    assert_eq!(j["pair"], json!(["local", srv.addr]), "{j:#}");
    assert_eq!(j["transfer"]["bytes"], tree_bytes(&t), "{j:#}");
    let sends = records(&hist, "send");
    assert_eq!(sends.len(), 1, "{sends:#?}");
    assert_eq!(
        sends[0]["destination_host"],
        srv.addr.as_str(),
        "{sends:#?}"
    );
}

#[test]
fn plan_and_send_refuse_a_deadline_and_a_rate_the_history_says_cannot_be_met() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    tree(&root, true);
    let srv = serve(&root, &["--anonymous"]);
    let hist = dir.path().join("h.sqlite");
    let src = format!("ftp://{}/tree", srv.addr);
    // A first send with probes leaves an estimate for TCP (PLUT, capped by its cost per file on
    // this tree, is not probed and stays without one).
    let first = dir.path().join("first");
    let (out, j) = run_json("send", &src, s(&first), &hist, &["--profile-budget", "2s"]);
    assert_sent(&out, &j, SMALL_FILES + 1);

    let d = dir.path().join("d");
    let (out, j) = run_json("plan", &src, s(&d), &hist, &["--deadline", "1ms"]);
    assert_refused(&out, &j, "deadline");
    let combos = j["combinations"].as_array().unwrap();
    assert!(!combos.is_empty(), "{j:#}");
    for c in combos {
        let want = if c["transport"] == "tcp" {
            "predicted past the deadline"
        } else {
            "no prediction to check the deadline or target rate against"
        };
        assert_eq!(c["verdict"], want, "{j:#}");
    }
    let (out, j) = run_json("send", &src, s(&d), &hist, &["--deadline", "1ms"]);
    assert_refused(&out, &j, "deadline");
    assert_eq!(j["outcome"], "refused", "{j:#}");
    assert!(!d.exists(), "a refused send created {}", d.display());
    let out = haul(&["send", &src, s(&d), "--deadline", "1ms"], &hist);
    assert_eq!(out.status.code(), Some(REFUSED));
    assert!(stderr(&out).contains("refused before moving any data"));
    assert!(!d.exists(), "a refused send created {}", d.display());
    assert_eq!(records(&hist, "send").len(), 1, "refusals are not sends");

    let (out, j) = run_json("plan", &src, s(&d), &hist, &["--rate", "100tbit"]);
    assert_refused(&out, &j, "target rate");
    // A deadline that can be met is planned with its term.
    let (out, j) = run_json("plan", &src, s(&d), &hist, &["--deadline", "10m"]);
    assert!(out.status.success(), "{j:#}");
    assert_eq!(j["chosen"]["transport"], "tcp", "{j:#}");
    assert_eq!(j["terms"], json!(["rate", "deadline"]), "{j:#}");
    assert!(!d.exists(), "haul plan moved data");
}

#[test]
fn an_unmeasured_transport_does_not_slip_past_a_deadline_the_measured_one_misses() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    tree(&root, true);
    let srv = serve(&root, &["--anonymous"]);
    let hist = dir.path().join("h.sqlite");
    let src = format!("ftp://{}/tree", srv.addr);
    // The default budget probes nothing: the history knows tcp only.
    let first = dir.path().join("first");
    let (out, j) = run_json("send", &src, s(&first), &hist, &[]);
    assert_sent(&out, &j, SMALL_FILES + 1);
    let d = dir.path().join("d");
    let (out, j) = run_json("plan", &src, s(&d), &hist, &["--deadline", "1ms"]);
    assert_refused(&out, &j, "deadline");
    let (out, j) = run_json("send", &src, s(&d), &hist, &["--deadline", "1ms"]);
    assert_refused(&out, &j, "deadline");
    assert!(!d.exists(), "a send with a 1 ms deadline moved data: {j:#}");
}

#[test]
fn encryption_is_refused_over_ftp_urls() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    tree(&root, false);
    let srv = serve(&root, &["--anonymous"]);
    let hist = dir.path().join("h.sqlite");
    let src = format!("ftp://{}/tree", srv.addr);
    let d = dir.path().join("d");
    let (out, j) = run_json("plan", &src, s(&d), &hist, &["--encrypted"]);
    assert_refused(&out, &j, "encrypt");
    assert_eq!(j["request"]["encrypted"], true, "{j:#}");
    for c in j["combinations"].as_array().unwrap() {
        assert_eq!(c["verdict"], "not encrypted on every leg", "{j:#}");
    }
    let out = haul(&["send", &src, s(&d), "--encrypted"], &hist);
    assert_eq!(out.status.code(), Some(REFUSED), "{}", stderr(&out));
    assert!(stderr(&out).contains("encryption"), "{}", stderr(&out));
    assert!(!d.exists(), "a refused send created {}", d.display());
    assert!(records(&hist, "send").is_empty());
}

#[test]
fn request_file_errors_name_the_field_and_a_valid_file_drives_plan_and_send() {
    let dir = tempfile::tempdir().unwrap();
    let hist = dir.path().join("h.sqlite");
    let req = dir.path().join("r.toml");
    let ends = "src = \"ftp://127.0.0.1:9/tree\"\ndst = \"/nonexistent/d\"\n";
    for (body, names) in [
        ("bogus = 3\n", ["bogus", "unknown field"]),
        ("[require]\nfast = true\n", ["fast", "unknown field"]),
        ("[weights]\nspeed = 1.0\n", ["speed", "unknown field"]),
        ("deadline = \"10 parsecs\"\n", ["deadline", "parsecs"]),
        ("rate = \"5 furlongs\"\n", ["rate", "furlongs"]),
        ("size = \"3 cubits\"\n", ["size", "cubits"]),
    ] {
        fs::write(&req, format!("{ends}{body}")).unwrap();
        for sub in ["plan", "send"] {
            let out = haul(&[sub, "--request", s(&req)], &hist);
            assert!(!out.status.success(), "{sub} accepted {body:?}");
            assert_ne!(
                out.status.code(),
                Some(REFUSED),
                "{body:?} is an error, not a refusal"
            );
            for n in names {
                assert!(stderr(&out).contains(n), "{sub} {body:?}: {}", stderr(&out));
            }
        }
    }
    // A flag's bad unit names its field too.
    fs::write(&req, ends).unwrap();
    let out = haul(
        &["plan", "--request", s(&req), "--deadline", "3 fortnights"],
        &hist,
    );
    assert!(
        !out.status.success() && stderr(&out).contains("deadline"),
        "{}",
        stderr(&out)
    );

    let root = dir.path().join("root");
    let t = tree(&root, false);
    let srv = serve(&root, &["--anonymous"]);
    let (src, dst) = (format!("ftp://{}/tree", srv.addr), dir.path().join("d"));
    let text = format!(
        "src = \"{src}\"\ndst = \"{}\"\ndeadline = \"1h\"\nrate = \"1mbit\"\n\
         [require]\nreliable = true\nloss_tolerance = 0.0\n[weights]\nrate = 2.0\n",
        s(&dst)
    );
    fs::write(&req, text).unwrap();
    // With an empty history nothing predicts the transfer: haul plan cannot check the
    // deadline and the target, and says so (haul send probes first).
    let out = haul(&["plan", "--request", s(&req), "--json"], &hist);
    assert_eq!(out.status.code(), Some(REFUSED), "{}", stderr(&out));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        j["refused"]
            .as_str()
            .unwrap_or("")
            .contains("cannot be checked"),
        "{j:#}"
    );
    assert_eq!(
        (&j["source"], &j["destination"]),
        (&json!(src), &json!(s(&dst)))
    );
    let r = &j["request"];
    assert_eq!(r["deadline_s"], 3600.0, "{j:#}");
    assert_eq!(r["target_bps"], 1e6, "{j:#}");
    assert_eq!(r["weights"], json!({"rate": 2.0, "deadline": 1.0}), "{j:#}");
    assert_eq!(
        (&r["files"], &r["size"]),
        (&json!(SMALL_FILES), &json!(tree_bytes(&t)))
    );
    assert_eq!(j["terms"], json!(["rate", "deadline"]), "{j:#}");
    assert!(!dst.exists(), "haul plan moved data");
    // haul send probes (a deadline needs a prediction, however small the transfer), plans
    // and moves.
    let out = haul(&["send", "--request", s(&req), "--json"], &hist);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_sent(&out, &j, SMALL_FILES);
    assert_same_tree(&t, &dst);
    assert_eq!(j["deadline_met"], true, "{j:#}");
    assert!(!j["probes"].as_array().unwrap().is_empty(), "{j:#}");
    // Now the history predicts it; a flag overrides the file.
    let out = haul(
        &["plan", "--request", s(&req), "--json", "--deadline", "2h"],
        &hist,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["request"]["deadline_s"], 7200.0, "{j:#}");
    assert!(j["chosen"]["predicted_s"].as_f64().is_some(), "{j:#}");
}

#[test]
fn send_from_the_globus_server_takes_tcp_and_notes_that_plut_is_not_offered() {
    if skip_without_globus("send_from_the_globus_server") {
        return;
    }
    let srv_dir = tempfile::tempdir().unwrap();
    let t = tree(srv_dir.path(), false);
    fs::write(t.join("two.bin"), random_bytes(2 << 20, 7)).unwrap();
    let srv = GlobusServer::start(srv_dir.path()).expect("start globus-gridftp-server");
    let local = tempfile::tempdir().unwrap();
    let hist = local.path().join("h.sqlite");
    let src = srv.url("tree");
    let d = local.path().join("d");
    let (out, j) = run_json("plan", &src, s(&d), &hist, &[]);
    assert!(
        out.status.success(),
        "{}\n{}",
        stderr(&out),
        srv.diagnostics()
    );
    assert_eq!(j["chosen"]["transport"], "tcp", "{j:#}");
    let combos = j["combinations"].as_array().unwrap();
    assert!(combos.iter().all(|c| c["transport"] != "plut"), "{j:#}");
    assert!(
        notes(&j).iter().any(|n| n.starts_with("plut: not offered")),
        "{j:#}"
    );
    assert_eq!(j["request"]["files"], SMALL_FILES + 1, "{j:#}");

    let (out, j) = run_json("send", &src, s(&d), &hist, &[]);
    assert!(out.status.success(), "{}", srv.diagnostics());
    assert_sent(&out, &j, SMALL_FILES + 1);
    assert_same_tree(&t, &d);
    assert_eq!(j["transfer"]["transport"], "tcp", "{j:#}");
    let combos = j["combinations"].as_array().unwrap();
    assert!(combos.iter().all(|c| c["transport"] != "plut"), "{j:#}");
    assert!(
        notes(&j).iter().any(|n| n.starts_with("plut: not offered")),
        "{j:#}"
    );
    assert_eq!(records(&hist, "send").len(), 1);
}

#[test]
fn transports_flag_restricts_the_plan_and_unknown_names_are_errors() {
    let f = fixture(false);
    let dir = &f.dir;
    let (t, hist, src) = (f.tree.clone(), f.hist.clone(), f.src.clone());
    let d = dir.path().join("d");
    let (out, j) = run_json("plan", &src, s(&d), &hist, &["--transports", "udt"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let combos = j["combinations"].as_array().unwrap();
    assert_eq!(combos.len(), 1, "{j:#}");
    assert_eq!(j["chosen"]["transport"], "udt", "{j:#}");
    let (out, j) = run_json("send", &src, s(&d), &hist, &["--transports", "udt"]);
    assert_sent(&out, &j, SMALL_FILES);
    assert_eq!(j["transfer"]["transport"], "udt", "{j:#}");
    assert_same_tree(&t, &d);
    let sends = records(&hist, "send");
    assert_eq!(sends[0]["params"]["transport"], "udt", "{sends:#?}");

    let (out, j) = run_json("plan", &src, s(&d), &hist, &["--transports", "tcp,plut"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(j["combinations"].as_array().unwrap().len(), 2, "{j:#}");

    let e = dir.path().join("e");
    for (sub, list, bad) in [("plan", "tcp,quic", "quic"), ("send", "warp", "warp")] {
        let out = haul(&[sub, &src, s(&e), "--transports", list], &hist);
        assert!(!out.status.success(), "{sub} --transports {list} succeeded");
        assert_eq!(
            out.status.code(),
            Some(2),
            "an unknown name is a usage error: {}",
            stderr(&out)
        );
        assert!(stderr(&out).contains(bad), "{sub}: {}", stderr(&out));
    }
    assert!(
        !e.exists(),
        "a send with an unknown transport created {}",
        e.display()
    );
}
