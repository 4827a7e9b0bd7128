//! `docs/platform-matrix.md` is the code's matrix rendered; this test fails
//! when they differ. Regenerate with
//! `CORRAL_BLESS=1 cargo test -p corral-sandbox-core platform_matrix_doc`.

use corral_sandbox_core::platform::render_markdown;

#[test]
fn platform_matrix_doc() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/platform-matrix.md");
    let want = render_markdown();
    if std::env::var_os("CORRAL_BLESS").is_some() {
        std::fs::write(path, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        have == want,
        "docs/platform-matrix.md differs from the code's matrix; regenerate it with\n  CORRAL_BLESS=1 cargo test -p corral-sandbox-core platform_matrix_doc\nand commit the result"
    );
}
