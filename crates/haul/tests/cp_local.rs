//! `haul cp`'s local side against a real `haul serve`: what it does with links planted next to
//! the destination, with missing destination directories, with nonsense counts, and how it says
//! that nothing was verified.
mod common;

use common::haul::*;

use std::fs;
use std::path::Path;

/// A served tree with one file `f` of `n` random bytes, and a local `out` directory.
fn served(dir: &Path, n: usize) -> (Serve, Vec<u8>) {
    let root = dir.join("root");
    fs::create_dir_all(&root).unwrap();
    fs::create_dir_all(dir.join("out")).unwrap();
    let data = random_bytes(n, 9);
    fs::write(root.join("f"), &data).unwrap();
    (serve(&root, &["--anonymous"]), data)
}

/// Finding 15: a symbolic link planted at the part-file name is an error naming it, and the file
/// it points to is left alone.
#[test]
fn a_symlink_at_the_part_file_name_is_refused_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = served(dir.path(), 100_000);
    let victim = dir.path().join("victim");
    fs::write(&victim, b"precious").unwrap();
    let dst = dir.path().join("out/f");
    std::os::unix::fs::symlink(&victim, dir.path().join("out/f.haul-part")).unwrap();
    let out = cp(
        &[&format!("ftp://{}/f", s.addr), dst.to_str().unwrap()],
        &dir.path().join("h.sqlite"),
    );
    assert!(
        !out.status.success(),
        "a download wrote through a planted link"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("f.haul-part: symbolic link"),
        "the error names the link"
    );
    assert_eq!(fs::read(&victim).unwrap(), b"precious");
    assert!(
        fs::symlink_metadata(&dst).is_err(),
        "nothing landed at the destination"
    );
}
