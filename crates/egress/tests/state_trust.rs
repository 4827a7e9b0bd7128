//! A local user who creates corral's state directory first must not be able
//! to make root overwrite or read back files of the user's choosing (a
//! real second user, created for the test).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;

use corral_egress::host::{AppliedInputs, StateError, StateStore};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::Config;
use corral_test_support::TestUser;

/// A root-owned sticky, world-writable directory (like /tmp) in a fresh
/// temp dir the test user can reach.
fn shared_parent() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let open = t.path().join("shared");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    t
}

#[test]
fn a_state_dir_made_by_another_user_is_refused_and_its_links_never_followed() {
    let Some(user) = TestUser::create() else {
        return;
    };
    let t = shared_parent();
    let state = t.path().join("shared/state");
    let victim = t.path().join("victim");
    std::fs::write(&victim, "root's file\n").unwrap();
    // The user gets there first: the directory, and a temp-name symlink
    // pointing at a file only root may write.
    user.sh(&format!(
        "mkdir -m 0777 {s} && ln -s {v} {s}/applied.json.tmp && ln -s {v} {s}/applied.json",
        s = state.display(),
        v = victim.display()
    ));
    let store = StateStore::new(&state);
    let inputs = AppliedInputs::new(&Config::builtin_default(), Resolution::new());
    let err = store.save(&inputs).unwrap_err();
    assert!(matches!(err, StateError::Files(_)), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&state.display().to_string())
            && msg.contains(&format!("owner uid {}", user.uid))
            && msg.contains("chmod 0700"),
        "the message names the path, its owner and the fix: {msg}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's file\n");
    // Reading back what the user planted is refused too.
    assert!(matches!(store.load(), Err(StateError::Files(_))));
    assert!(store.lock().is_err());

    // Once root owns it (and it is private), it is used, and a planted
    // link is replaced, never followed.
    std::fs::remove_dir_all(&state).unwrap();
    store.save(&inputs).unwrap();
    let meta = std::fs::metadata(&state).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o700);
    let file = std::fs::metadata(store.path()).unwrap();
    assert_eq!(file.permissions().mode() & 0o7777, 0o600);
    assert_eq!(store.load().unwrap(), Some(inputs));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's file\n");
}
