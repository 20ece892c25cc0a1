//! The checked-in header, `include/stampede.h`, is exactly what cbindgen makes now of the source
//! of the functions this library exports (`crates/stampede-capi`).
//!
//! Why checked in and tested, rather than written by a build script: a build script may write
//! only under `OUT_DIR` (one that rewrites a tracked file dirties the tree and races concurrent
//! builds), and it would compile cbindgen and its parser into every build of the workspace,
//! release builds included. Checked in, the header is readable without building, an ABI change
//! shows in review as a diff of `stampede.h`, and cbindgen is only a dev-dependency: this test
//! fails when the header is stale and says how to regenerate it.

use std::path::Path;

/// Regenerating the header from the source gives the checked-in bytes (with `STAMPEDE_C_BLESS`
/// set, the test writes the fresh header instead).
#[test]
fn header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml parses");
    // `with_src` parses lib.rs and follows its `mod` items: no `cargo metadata` call from a test.
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("../stampede-capi/src/lib.rs"))
        .generate()
        .expect("cbindgen reads the crate");
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let path = crate_dir.join("include/stampede.h");
    if std::env::var_os("STAMPEDE_C_BLESS").is_some() {
        std::fs::create_dir_all(crate_dir.join("include")).expect("include/ can be made");
        std::fs::write(&path, &fresh).expect("the header can be written");
        return;
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == fresh,
        "{} is stale: regenerate it with `make -C c header` (or STAMPEDE_C_BLESS=1 cargo test -p stampede-c \
         header_is_current) and review the diff",
        path.display()
    );
}
