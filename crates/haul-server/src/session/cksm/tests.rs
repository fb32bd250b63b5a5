use super::*;

#[test]
fn a_file_written_just_now_is_not_settled() {
    let f = tempfile::NamedTempFile::new().expect("temp file");
    fs::write(f.path(), b"x").expect("write");
    assert!(!FileId::of(&fs::metadata(f.path()).expect("stat")).settled());
    let old = SystemTime::now() - Duration::from_secs(10);
    f.as_file().set_modified(old).expect("set mtime");
    assert!(FileId::of(&fs::metadata(f.path()).expect("stat")).settled());
}
