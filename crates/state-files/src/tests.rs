use std::os::unix::fs::{MetadataExt, PermissionsExt};

use super::*;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn creates_private_directories_and_files() {
    let t = tmp();
    let dir = StateDir::open(&t.path().join("a/b")).unwrap();
    let meta = std::fs::metadata(t.path().join("a/b")).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o700);
    dir.write("x.json", b"one").unwrap();
    dir.write("x.json", b"two").unwrap();
    assert_eq!(dir.read("x.json").unwrap().as_deref(), Some(&b"two"[..]));
    let meta = std::fs::metadata(dir.file_path("x.json")).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o600);
    // No temp file is left behind.
    assert_eq!(dir.names().unwrap(), vec!["x.json".to_owned()]);
    dir.write_with_mode("conf", b"c", 0o640).unwrap();
    let meta = std::fs::metadata(dir.file_path("conf")).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o640);
    assert!(dir.remove("conf").unwrap());
    assert!(!dir.remove("conf").unwrap());
    assert_eq!(dir.read("conf").unwrap(), None);
    let sub = dir.subdir("gw").unwrap();
    sub.write("f", b"x").unwrap();
    assert!(dir.remove_subdir("gw").unwrap());
    assert!(!dir.remove_subdir("gw").unwrap());
}

#[test]
fn a_regenerated_write_replaces_like_a_synced_one() {
    let t = tmp();
    let dir = StateDir::open(t.path()).unwrap();
    dir.write_regenerated("gw.conf", b"one", 0o644).unwrap();
    dir.write_regenerated("gw.conf", b"two", 0o640).unwrap();
    assert_eq!(dir.read("gw.conf").unwrap().as_deref(), Some(&b"two"[..]));
    let meta = std::fs::metadata(dir.file_path("gw.conf")).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o640);
    assert_eq!(dir.names().unwrap(), vec!["gw.conf".to_owned()]);
    // A symlink in its place is replaced, never followed.
    let elsewhere = t.path().join("elsewhere");
    std::fs::write(&elsewhere, b"keep").unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.file_path("link")).unwrap();
    dir.write_regenerated("link", b"new", 0o600).unwrap();
    assert_eq!(std::fs::read(&elsewhere).unwrap(), b"keep");
    assert_eq!(dir.read("link").unwrap().as_deref(), Some(&b"new"[..]));
}

#[test]
fn group_writable_and_symlinked_directories_are_refused() {
    let t = tmp();
    let path = t.path().join("state");
    std::fs::create_dir(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o775)).unwrap();
    let err = StateDir::open(&path).unwrap_err().to_string();
    assert!(err.contains("group or others may write"), "{err}");
    assert!(
        err.contains("mode 0775") && err.contains("chmod 0700"),
        "{err}"
    );

    let link = t.path().join("link");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let err = StateDir::open(&link).unwrap_err().to_string();
    assert!(err.contains("symlink"), "{err}");

    // A world-writable, non-sticky parent lets anyone swap the directory.
    let open_parent = t.path().join("open");
    std::fs::create_dir(&open_parent).unwrap();
    std::fs::set_permissions(&open_parent, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = StateDir::open(&open_parent.join("state"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("parent of the state directory"), "{err}");
    std::fs::set_permissions(&open_parent, std::fs::Permissions::from_mode(0o1777)).unwrap();
    StateDir::open(&open_parent.join("state")).unwrap();
}

#[test]
fn symlinks_inside_are_never_followed() {
    let t = tmp();
    let dir = StateDir::open(&t.path().join("s")).unwrap();
    let victim = t.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    std::os::unix::fs::symlink(&victim, dir.file_path("applied.json")).unwrap();
    let err = dir.read("applied.json").unwrap_err().to_string();
    assert!(err.contains("symlink"), "{err}");
    // The write replaces the link itself; the victim is untouched.
    dir.write("applied.json", b"new").unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(
        !std::fs::symlink_metadata(dir.file_path("applied.json"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    std::os::unix::fs::symlink(t.path(), dir.file_path("sub")).unwrap();
    let err = dir.subdir("sub").unwrap_err().to_string();
    assert!(err.contains("symlink"), "{err}");
}

#[test]
fn names_must_be_one_component() {
    let t = tmp();
    let dir = StateDir::open(t.path()).unwrap();
    for bad in ["", ".", "..", "a/b", "a\0b"] {
        assert!(
            matches!(dir.write(bad, b"x"), Err(StateFileError::BadName { .. })),
            "{bad:?}"
        );
    }
}

#[test]
fn the_lock_is_exclusive() {
    let t = tmp();
    let dir = StateDir::open(t.path()).unwrap();
    let held = dir.lock(HOST_LOCK).unwrap();
    // flock locks belong to the open file: a second open is a second holder.
    let other = StateDir::open(t.path()).unwrap();
    assert!(other.try_lock(HOST_LOCK).unwrap().is_none());
    drop(held);
    assert!(other.try_lock(HOST_LOCK).unwrap().is_some());
}

#[test]
fn private_files_are_created_0600_tightened_and_never_symlinks() {
    let t = tmp();
    let dir = StateDir::open(&t.path().join("s")).unwrap();
    let path = dir.private_file("db").unwrap();
    assert_eq!(path, dir.file_path("db"));
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(&path), 0o600);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    dir.private_file("db").unwrap();
    assert_eq!(mode(&path), 0o600, "a wider file is made private again");
    std::os::unix::fs::symlink("/etc/passwd", dir.file_path("link")).unwrap();
    let e = dir.private_file("link").unwrap_err().to_string();
    assert!(e.contains("symlink"), "{e}");
    std::fs::create_dir(dir.file_path("d")).unwrap();
    assert!(dir.private_file("d").is_err());
}

#[test]
fn search_permission_reaches_from_the_root_without_listing() {
    let t = tmp();
    let dir = StateDir::open(&t.path().join("a/b")).unwrap();
    dir.allow_search_from_root().unwrap();
    for p in [t.path().join("a/b"), t.path().join("a")] {
        let mode = std::fs::metadata(&p).unwrap().mode() & 0o7777;
        assert_eq!(mode, SEARCH_MODE, "{}", p.display());
    }
    for p in t.path().ancestors() {
        let mode = std::fs::metadata(p).unwrap().mode();
        assert_ne!(mode & 0o001, 0, "{}", p.display());
    }
    // The trust rule still holds for a searchable directory.
    StateDir::open(&t.path().join("a/b")).unwrap();

    // A shared parent (group bits set) is not corral's to change.
    let shared = t.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o750)).unwrap();
    let inner = StateDir::open(&shared.join("s")).unwrap();
    let err = inner.allow_search_from_root().unwrap_err();
    assert!(
        matches!(&err, StateFileError::Unsearchable { path, .. } if *path == shared),
        "{err}"
    );
    assert!(err.to_string().contains("chmod o+x"), "{err}");
    let mode = std::fs::metadata(&shared).unwrap().mode() & 0o7777;
    assert_eq!(mode, 0o750);
}
