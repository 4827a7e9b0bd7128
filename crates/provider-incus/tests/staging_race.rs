//! Staging a read-only mount while someone keeps swapping a directory in it
//! with a symlink to a secret directory outside the allowed roots
//! (`renameat2(RENAME_EXCHANGE)`, atomic) must never copy the secret: a
//! check-then-copy by path follows the link whenever the swap lands between
//! the check and the copy. No daemon needed: the copy happens before Incus
//! hears of the mount.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use corral_provider_incus::mounts::MountPolicy;
use corral_sandbox_core::sandbox::MountSpec;

const SECRET: &[u8] = b"root-only secret";
const ROUNDS: u32 = 400;

/// The contents of every regular file in the staged tree, walked without
/// following a symlink (a recreated link points into the guest, not here).
fn staged_files(dir: &std::path::Path) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            out.extend(staged_files(&path));
        } else if meta.is_file() {
            out.push(std::fs::read(&path).unwrap());
        }
    }
    out
}

#[test]
fn a_swapped_symlink_never_leaks_a_secret_into_staging() {
    let tmp = tempfile::tempdir().unwrap();
    let roots = tmp.path().join("roots");
    let repo = roots.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let secret = tmp.path().join("secret");
    std::fs::create_dir(&secret).unwrap();
    std::fs::write(secret.join("f"), SECRET).unwrap();
    std::fs::set_permissions(secret.join("f"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let sub = repo.join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("f"), b"public").unwrap();
    std::os::unix::fs::symlink(&secret, repo.join("sub.link")).unwrap();
    // A setuid file in the tree is staged without its setuid bit.
    let suid = repo.join("tool");
    std::fs::write(&suid, b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let policy = MountPolicy {
        allowed_roots: vec![roots.clone()],
        staging_root: tmp.path().join("staging"),
        ..MountPolicy::default()
    };
    let mount = MountSpec {
        source: repo.clone(),
        target: "/work".into(),
        read_only: true,
    };

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, repo) = (stop.clone(), repo.clone());
        std::thread::spawn(move || {
            let a = std::ffi::CString::new(repo.join("sub").into_os_string().into_encoded_bytes())
                .unwrap();
            let b =
                std::ffi::CString::new(repo.join("sub.link").into_os_string().into_encoded_bytes())
                    .unwrap();
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: two valid C strings alive for the call; the call
                // only swaps the two names.
                unsafe {
                    libc::renameat2(
                        libc::AT_FDCWD,
                        a.as_ptr(),
                        libc::AT_FDCWD,
                        b.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    );
                }
            }
        })
    };
    let mut leaks = 0;
    let mut copied_files = 0;
    for i in 0..ROUNDS {
        let id = format!("{i:08x}");
        let staged: PathBuf = match policy.prepare(&id, std::slice::from_ref(&mount)) {
            Ok(devices) => PathBuf::from(&devices[0].source),
            // A swap seen mid-copy is refused: that is fine, never a leak.
            Err(_) => {
                let _ = policy.remove_staging(&id);
                continue;
            }
        };
        for content in staged_files(&staged) {
            copied_files += 1;
            if content == SECRET {
                leaks += 1;
            }
        }
        let mode = std::fs::metadata(staged.join("tool"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o755, "setuid bit staged");
        policy.remove_staging(&id).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(
        copied_files > 0,
        "control: the file itself was never staged"
    );
    assert_eq!(leaks, 0, "the secret was staged {leaks} times in {ROUNDS}");
}
