//! The commands Globus clients send that `globus-gridftp-server` answers (issue 27, item 4):
//! MLSR, MFMT, SITE CHMOD / CHGRP / UTIME / SETDISKSTACK / WHOAMI and CKSM SHA1 / SHA256 /
//! SHA512, each with its success and its refusals: outside the root, through a symlink, by a
//! read-only user, with a bad argument.
mod common;

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use common::*;

/// A served root with `f` (6 bytes), `sub/b`, `sub/deeper/c`, `empty/`, an inside symlink to a
/// file (`flink`) and one to a directory (`dlink`), and `out`, a symlink to a directory
/// outside the root holding `victim`.
struct Tree {
    _top: tempfile::TempDir,
    root: PathBuf,
    victim: PathBuf,
}

fn tree() -> Tree {
    let top = tempfile::tempdir().unwrap();
    let root = top.path().join("root");
    let outside = top.path().join("outside");
    fs::create_dir_all(root.join("sub/deeper")).unwrap();
    fs::create_dir_all(root.join("empty")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(root.join("f"), b"hello\n").unwrap();
    fs::write(root.join("sub/b"), b"b").unwrap();
    fs::write(root.join("sub/deeper/c"), b"c").unwrap();
    symlink("f", root.join("flink")).unwrap();
    symlink("sub", root.join("dlink")).unwrap();
    symlink(&outside, root.join("out")).unwrap();
    let victim = outside.join("victim");
    fs::write(&victim, b"precious").unwrap();
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o640)).unwrap();
    Tree {
        _top: top,
        root,
        victim,
    }
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn mtime(p: &Path) -> i64 {
    fs::metadata(p).unwrap().mtime()
}

/// A listing command in MODE S over PASV: (its final reply, the listing's lines).
fn listing(c: &mut Ctl, cmd: &str) -> (haul_proto::Reply, Vec<String>) {
    let addr = c.pasv();
    c.send(cmd);
    let r = c.reply();
    if r.code != 150 {
        return (r, Vec::new());
    }
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut body = String::new();
    std::io::Read::read_to_string(&mut s, &mut body).unwrap();
    let lines = body.split_terminator("\r\n").map(String::from).collect();
    (c.finish().1, lines)
}

/// Sends each command and checks its reply's code and that its text says what it should.
fn assert_refused(c: &mut Ctl, cases: &[(&str, u16, &str)]) {
    for &(cmd, code, says) in cases {
        let r = c.cmd(cmd);
        assert_eq!(r.code, code, "{cmd}: {r}");
        assert!(r.text().contains(says), "{cmd}: {r}");
    }
}

/// The name at the end of an MLSx line (after the facts' `; `).
fn name(line: &str) -> &str {
    line.split_once("; ").map_or("", |(_, n)| n)
}

#[test]
fn mlsr_lists_the_tree_depth_first_with_paths_relative_to_the_listed_dir() {
    let t = tree();
    let srv = server(&t.root, |_| {});
    let mut c = Ctl::anon(srv.addr());
    let (r, lines) = listing(&mut c, "MLSR /");
    assert_eq!(r.code, 226, "{r}");
    let names: Vec<&str> = lines.iter().map(|l| name(l)).collect();
    assert_eq!(
        names,
        [
            ".",
            "dlink",
            "empty",
            "f",
            "flink",
            "out",
            "sub",
            "sub/b",
            "sub/deeper",
            "sub/deeper/c"
        ],
        "as globus-gridftp-server lists it: cdir first, no pdir, each directory's entries \
         right after it; symlinks are never walked into:\n{}",
        lines.join("\n")
    );
    assert!(lines[0].starts_with("Type=cdir;"), "{}", lines[0]);
    let f = lines.iter().find(|l| name(l) == "f").unwrap();
    assert!(f.contains("Type=file;") && f.contains("Size=6;"), "{f}");
    let deeper = lines.iter().find(|l| name(l) == "sub/deeper").unwrap();
    assert!(deeper.contains("Type=dir;"), "{deeper}");
    assert!(
        !lines.iter().any(|l| l.contains("victim")),
        "nothing outside the root is listed"
    );

    let (r, lines) = listing(&mut c, "MLSR sub");
    assert_eq!(r.code, 226, "{r}");
    let names: Vec<&str> = lines.iter().map(|l| name(l)).collect();
    assert_eq!(names, [".", "b", "deeper", "deeper/c"]);
}

#[test]
fn mlsr_refuses_files_escapes_and_trees_over_its_limits() {
    let t = tree();
    let srv = server(&t.root, |c| {
        c.mlsr_limits.max_depth = 1;
        c.mlsr_limits.max_entries = 9;
    });
    let mut c = Ctl::anon(srv.addr());
    let (r, _) = listing(&mut c, "MLSR f");
    assert_eq!(r.code, 501, "{r}");
    let (r, _) = listing(&mut c, "MLSR out");
    assert_eq!(r.code, 550, "{r}");
    assert!(r.text().contains("outside the served root"), "{r}");
    let (r, _) = listing(&mut c, "MLSR /");
    assert_eq!(r.code, 550, "{r}");
    assert!(r.text().contains("deeper than 1 levels"), "{r}");
    let (r, lines) = listing(&mut c, "MLSR sub");
    assert_eq!(r.code, 226, "one level below is within the limit: {r}");
    assert_eq!(lines.len(), 4);

    let srv = server(&t.root, |c| c.mlsr_limits.max_entries = 8);
    let mut c = Ctl::anon(srv.addr());
    let (r, _) = listing(&mut c, "MLSR /");
    assert_eq!(r.code, 550, "{r}");
    assert!(r.text().contains("more than 8 entries"), "{r}");
}

#[test]
fn site_chmod_sets_permission_bits_of_real_names_only() {
    let t = tree();
    let f = t.root.join("f");
    fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
    let srv = server(&t.root, |_| {});
    let mut c = Ctl::anon(srv.addr());
    let r = c.cmd("SITE CHMOD 600 f");
    assert_eq!(r.code, 250, "{r}");
    assert_eq!(mode(&f), 0o600);
    let r = c.cmd("SITE CHMOD 0750 /sub/deeper");
    assert_eq!(r.code, 250, "{r}");
    assert_eq!(mode(&t.root.join("sub/deeper")), 0o750);

    assert_refused(
        &mut c,
        &[
            ("SITE CHMOD 4755 f", 501, "set-user-ID"),
            ("SITE CHMOD 1777 f", 501, "sticky"),
            ("SITE CHMOD 999 f", 501, "octal"),
            ("SITE CHMOD 644", 501, "needs an argument"),
            ("SITE CHMOD 644 flink", 550, "symbolic link"),
            ("SITE CHMOD 644 out/victim", 550, "outside the served root"),
            ("SITE CHMOD 644 nope", 550, "No such file"),
            ("SITE CHMOD 644 /", 550, "served root"),
            ("SITE CHMOD 644 .f.haul-part", 553, "reserved"),
        ],
    );
    assert_eq!(mode(&f), 0o600, "the file behind the symlink is untouched");
    assert_eq!(mode(&t.victim), 0o640, "the file outside is untouched");
}

#[test]
fn mfmt_and_site_utime_set_the_modification_time() {
    let t = tree();
    let f = t.root.join("f");
    let srv = server(&t.root, |_| {});
    let mut c = Ctl::anon(srv.addr());
    let r = c.cmd("MFMT 20200102030405 f");
    assert_eq!(r.code, 213, "{r}");
    assert_eq!(r.text(), "Modify=20200102030405; f");
    assert_eq!(mtime(&f), 1_577_934_245);
    assert_eq!(c.cmd("MDTM f").text(), "20200102030405");

    let r = c.cmd("SITE UTIME 20210102030405 /sub");
    assert_eq!(r.code, 250, "{r}");
    assert_eq!(c.cmd("MDTM sub").text(), "20210102030405");

    let before = mtime(&t.victim);
    let flink_target = mtime(&f);
    assert_refused(
        &mut c,
        &[
            ("MFMT 20201302030405 f", 501, "month"),
            ("MFMT 2020010203040 f", 501, "YYYYMMDDHHMMSS"),
            ("MFMT 20200102030405", 501, "MFMT"),
            ("SITE UTIME f 20210102030405", 501, "YYYYMMDDHHMMSS"),
            ("MFMT 19990102030405 flink", 550, "symbolic link"),
            ("SITE UTIME 19990102030405 flink", 550, "symbolic link"),
            (
                "MFMT 19990102030405 out/victim",
                550,
                "outside the served root",
            ),
            ("MFMT 19990102030405 nope", 550, "No such file"),
        ],
    );
    assert_eq!(
        mtime(&f),
        flink_target,
        "the file behind the symlink keeps its time"
    );
    assert_eq!(mtime(&t.victim), before, "the file outside keeps its time");
}

#[test]
fn site_chgrp_sets_only_the_servers_own_groups() {
    let t = tree();
    let f = t.root.join("f");
    // SAFETY: getegid cannot fail.
    let own = unsafe { libc::getegid() };
    // SAFETY: geteuid cannot fail.
    let root_user = unsafe { libc::geteuid() } == 0;
    if root_user {
        std::os::unix::fs::chown(&f, None, Some(65534)).unwrap();
    }
    let srv = server(&t.root, |_| {});
    let mut c = Ctl::anon(srv.addr());
    let r = c.cmd(&format!("SITE CHGRP {own} f"));
    assert_eq!(r.code, 250, "{r}");
    assert_eq!(fs::metadata(&f).unwrap().gid(), own);

    let before = fs::metadata(&t.victim).unwrap().gid();
    let foreign = if own == 65534 { 65533 } else { 65534 };
    let foreign_cmd = format!("SITE CHGRP {foreign} f");
    let own_link = format!("SITE CHGRP {own} flink");
    let own_out = format!("SITE CHGRP {own} out/victim");
    assert_refused(
        &mut c,
        &[
            (&foreign_cmd, 550, "not one of this server's groups"),
            ("SITE CHGRP no-such-group-here f", 550, "no group"),
            (&own_link, 550, "symbolic link"),
            (&own_out, 550, "outside the served root"),
        ],
    );
    assert_eq!(fs::metadata(&f).unwrap().gid(), own);
    assert_eq!(fs::metadata(&t.victim).unwrap().gid(), before);
}

#[test]
fn a_read_only_user_changes_no_attributes() {
    let t = tree();
    let f = t.root.join("f");
    fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
    let (m, g) = (mtime(&f), fs::metadata(&f).unwrap().gid());
    let srv = server(&t.root, |c| c.anonymous_write = false);
    let mut c = Ctl::anon(srv.addr());
    let chgrp = format!("SITE CHGRP {g} f");
    assert_refused(
        &mut c,
        &[
            ("SITE CHMOD 600 f", 550, "read-only"),
            (&chgrp, 550, "read-only"),
            ("SITE UTIME 20000101000000 f", 550, "read-only"),
            ("MFMT 20000101000000 f", 550, "read-only"),
        ],
    );
    assert_eq!((mode(&f), mtime(&f)), (0o644, m));
    let (r, lines) = listing(&mut c, "MLSR /");
    assert_eq!(r.code, 226, "reading the tree is allowed: {r}");
    let f_line = lines.iter().find(|l| name(l) == "f").unwrap();
    assert!(f_line.contains("Perm=r;"), "{f_line}");
}

#[test]
fn setdiskstack_whoami_cksm_sha_and_what_feat_and_help_offer() {
    let t = tree();
    let srv = server(&t.root, |_| {});
    let mut c = Ctl::anon(srv.addr());
    assert_eq!(c.cmd("SITE SETDISKSTACK file").code, 250);
    let r = c.cmd("SITE SETDISKSTACK file,remote");
    assert_eq!(r.code, 504, "{r}");
    assert!(r.text().contains("\"remote\""), "{r}");
    assert_eq!(c.cmd("SITE SETDISKSTACK").code, 501);
    let r = c.cmd("SITE WHOAMI");
    assert_eq!((r.code, r.text()), (200, "anonymous".to_string()));
    assert_eq!(c.cmd("SITE WHOAMI me").code, 501);

    // globus-gridftp-server's own answers for this file's "hello\n".
    for (alg, hex) in [
        ("SHA1", "f572d396fae9206628714fb2ce00f72e94f2258f"),
        (
            "sha256",
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03",
        ),
        (
            "SHA512",
            "e7c22b994c59d9cf2b48e549b1e24666636045930d3da7c1acb299d1c3b7f931\
             f94aae41edda2c2b207a36e10f8bcb8d45223e54878f5b316e7ce3b6bc019629",
        ),
    ] {
        let r = c.cmd(&format!("CKSM {alg} 0 -1 f"));
        assert_eq!((r.code, r.text()), (213, hex.to_string()), "{alg}");
    }
    let r = c.cmd("CKSM SHA256 1 2 f");
    assert_eq!(
        r.text(),
        "d65c3e892354b17a4c032593974d46bc8732c6c0b1ce56edf0c95511d1749cf5"
    );

    let feat = c.cmd("FEAT").text();
    for want in ["MLSR", "MFMT", "WHOAMI", "SHA1;SHA256;SHA512;"] {
        assert!(feat.contains(want), "FEAT lacks {want}: {feat}");
    }
    // The Globus client reads SITE HELP for CHMOD, CHGRP and UTIME, each after a character
    // that is not an upper-case letter.
    let help = c.cmd("SITE HELP").text();
    for want in [" CHMOD", " CHGRP", " UTIME", " MLSR", " MFMT"] {
        assert!(help.contains(want), "SITE HELP lacks {want}: {help}");
    }
}
