use super::*;
use std::os::unix::fs::symlink;

#[test]
fn normalizes_lexically() {
    assert_eq!(Root::normalize("/a/b", "../c"), "/a/c");
    assert_eq!(Root::normalize("/a", "../../../etc/passwd"), "/etc/passwd");
    assert_eq!(Root::normalize("/a", "/x/./y/"), "/x/y");
    assert_eq!(Root::normalize("/a", "~/f"), "/f");
    assert_eq!(Root::normalize("/", ".."), "/");
    assert_eq!(Root::target("/", "/dev/zero"), Target::Zero);
}

fn exdev(r: io::Result<impl std::fmt::Debug>) -> bool {
    matches!(r, Err(e) if e.raw_os_error() == Some(libc::EXDEV))
}

#[test]
fn symlinks_are_followed_only_inside_the_root() {
    let top = tempfile::tempdir().unwrap();
    let (root, outside) = (top.path().join("root"), top.path().join("outside"));
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), b"s").unwrap();
    std::fs::write(root.join("d/f"), b"inside").unwrap();
    symlink(&outside, root.join("esc")).unwrap();
    symlink("../outside/secret", root.join("rel-esc")).unwrap();
    symlink("d/f", root.join("in")).unwrap();
    symlink("../d/f", root.join("d/up")).unwrap();
    let r = Root::new(&root).unwrap();
    assert!(exdev(r.stat("/esc/secret")));
    assert!(exdev(r.stat("/rel-esc")));
    assert!(exdev(r.open_read("/esc/secret")));
    assert!(exdev(r.parent("/esc/new")));
    assert_eq!(r.stat("/in").unwrap().len(), 6);
    assert_eq!(r.stat("/d/up").unwrap().len(), 6);
    let entries = r.read_dir("/").unwrap();
    let esc = entries.iter().find(|e| e.name == "rel-esc").unwrap();
    assert!(
        esc.meta.file_type().is_symlink(),
        "an escaping link is listed as itself"
    );
    let inn = entries.iter().find(|e| e.name == "in").unwrap();
    assert!(inn.meta.is_file());
    let up = r.read_dir("/d").unwrap();
    assert!(
        up.iter().find(|e| e.name == "up").unwrap().meta.is_file(),
        "a link up to elsewhere in the root"
    );
}

#[test]
fn writes_never_follow_the_last_name() {
    let top = tempfile::tempdir().unwrap();
    let root = top.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let victim = top.path().join("victim");
    symlink(&victim, root.join(".f.haul-part")).unwrap();
    symlink(&victim, root.join("g")).unwrap();
    let r = Root::new(&root).unwrap();
    let p = r.parent("/f").unwrap();
    assert!(
        p.open_part(false).is_err(),
        "a symlink planted at the part name is not followed"
    );
    assert!(
        p.open_part(true).unwrap().metadata().unwrap().is_file(),
        "a fresh upload replaces it"
    );
    assert!(root
        .join(".f.haul-part")
        .symlink_metadata()
        .unwrap()
        .is_file());
    assert!(r.parent("/g").unwrap().open_write(false).is_err());
    assert!(!victim.exists());
    assert!(
        is_part_name(".f.haul-part") && !is_part_name(".haul-part") && !is_part_name("f.haul-part")
    );
}

#[test]
fn a_listing_survives_entries_that_come_and_go() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().to_path_buf();
    std::fs::write(dir.join(".up.haul-part"), b"in progress").unwrap();
    std::fs::write(dir.join("stays"), b"s").unwrap();
    let r = Root::new(&dir).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (dir, stop) = (dir.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let p = dir.join(format!("f{}", i % 64));
                let _ = std::fs::write(&p, b"x");
                let _ = std::fs::remove_file(&p);
                i += 1;
            }
        })
    };
    for _ in 0..3000 {
        let names: Vec<String> = r
            .read_dir("/")
            .expect("a listing of a busy directory")
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert!(names.contains(&"stays".to_string()));
        assert!(
            !names.iter().any(|n| n.ends_with(".haul-part")),
            "part files are not listed: {names:?}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churn.join().unwrap();
}
