//! `docs/platform-matrix.md` is the code's matrix rendered; this test fails
//! when they differ. Regenerate with
//! `CORRAL_BLESS=1 cargo test -p corral-sandbox-core platform_matrix_doc`.
//! Under a truthy `CI` the blessing is refused and the doc is compared:
//! CI must never pass by rewriting what it checks.

use corral_sandbox_core::platform::render_markdown;

/// What the test does with the doc.
#[derive(Debug, PartialEq, Eq)]
enum Mode {
    /// Rewrite it from the code.
    Bless,
    /// Compare it with the code.
    Compare,
}

fn mode(bless: bool, ci: bool) -> Mode {
    if bless && !ci {
        Mode::Bless
    } else {
        Mode::Compare
    }
}

#[test]
fn platform_matrix_doc() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/platform-matrix.md");
    let want = render_markdown();
    let bless = std::env::var_os("CORRAL_BLESS").is_some();
    let ci = corral_test_support::gate::in_ci();
    if bless && ci {
        eprintln!("CORRAL_BLESS is refused under CI: the doc is compared, not rewritten");
    }
    if mode(bless, ci) == Mode::Bless {
        std::fs::write(path, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        have == want,
        "docs/platform-matrix.md differs from the code's matrix; regenerate it with\n  CORRAL_BLESS=1 cargo test -p corral-sandbox-core platform_matrix_doc\nand commit the result"
    );
}

#[test]
fn blessing_is_refused_under_ci() {
    assert_eq!(mode(true, true), Mode::Compare);
    assert_eq!(mode(false, true), Mode::Compare);
    assert_eq!(mode(false, false), Mode::Compare);
    assert_eq!(mode(true, false), Mode::Bless);
}
