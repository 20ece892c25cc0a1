//! Runs the house rules (`stampede_tidy`) over the repository; a failure lists every violation
//! with what to do about it.

use std::path::{Path, PathBuf};

use stampede_tidy::{
    files, rust_files, spec_references, too_long, undocumented, unexplained_sleeps, unsafe_outside,
    unsafe_without_safety, Source,
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the repository's root")
}

/// Every crate directory under `crates/`.
fn crates() -> Vec<PathBuf> {
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .expect("crates/")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.join("Cargo.toml").is_file())
        .collect();
    crates.sort();
    crates
}

/// The Rust sources under `crates/<crate>/<sub>` of every crate.
fn sources(sub: &str) -> Vec<Source> {
    let root = root();
    crates()
        .iter()
        .map(|dir| dir.join(sub))
        .filter(|dir| dir.is_dir())
        .flat_map(|dir| rust_files(&root, &dir).expect("readable sources"))
        .collect()
}

fn assert_none(rule: &str, violations: Vec<String>) {
    assert!(violations.is_empty(), "{rule}: {} violation(s):\n{}", violations.len(), violations.join("\n"));
}

#[test]
fn sources_are_short_and_documented() {
    let sources = sources("src");
    assert!(sources.len() > 100, "the walk found the crates' sources ({})", sources.len());
    assert_none("short files", too_long(&sources));
    assert_none("module docs", undocumented(&sources));
}

#[test]
fn unsafe_lives_where_it_is_allowed() {
    let root = root();
    let lib =
        |krate: &str| std::fs::read_to_string(root.join("crates").join(krate).join("src/lib.rs")).expect("lib.rs");
    for krate in ["stampede-core", "stampede"] {
        assert!(lib(krate).contains("#![forbid(unsafe_code)]"), "{krate} forbids unsafe code");
    }
    for (krate, allowed) in [("stampede-engine", "src/os.rs"), ("stampede-wire", "src/shared.rs")] {
        assert!(lib(krate).contains("#![deny(unsafe_code)]"), "{krate} denies unsafe code");
        let sources = rust_files(&root, &root.join("crates").join(krate).join("src")).expect("sources");
        let allowed = Path::new("crates").join(krate).join(allowed);
        assert_none(krate, unsafe_outside(&sources, &[allowed.as_path()]));
        assert_none(krate, unsafe_without_safety(&sources));
    }
}

#[test]
fn sleeps_in_tests_say_why() {
    let mut sources = sources("tests");
    sources.extend(sources_named("src", "tests.rs"));
    assert_none("sleeps in tests", unexplained_sleeps(&sources));
}

/// The sources under `crates/*/<sub>` named `name` (unit-test modules kept in their own file).
fn sources_named(sub: &str, name: &str) -> Vec<Source> {
    sources(sub).into_iter().filter(|s| s.path.file_name().is_some_and(|n| n == name)).collect()
}

/// The repository's own text — docs, sources of every language, scripts — cites no
/// specification outside it.
#[test]
fn the_repository_stands_alone() {
    let root = root();
    let extensions = ["rs", "md", "py", "pyi", "java", "h", "c", "sh", "toml", "vectors"];
    let mut sources = Vec::new();
    for dir in ["crates", "docs", "python", "java", "c", "scripts", "tests", ".ci"] {
        if root.join(dir).is_dir() {
            sources.extend(files(&root, &root.join(dir), &extensions).expect("readable files"));
        }
    }
    let readme = std::fs::read_to_string(root.join("README.md")).expect("the README");
    sources.push(Source { path: PathBuf::from("README.md"), text: readme });
    assert!(sources.len() > 200, "the walk found the repository's files ({})", sources.len());
    // This crate names the rule it enforces.
    sources.retain(|s| !s.path.starts_with("crates/stampede-tidy"));
    assert_none("the repository stands alone", spec_references(&sources));
}

/// An embedded-only application (`stampede` with `default-features = false`, no `remote`
/// feature) builds without zenoh or the wire: the dependency graph cargo resolves for it holds
/// neither. (CI also lints that build: `.ci/run`.)
#[test]
fn an_embedded_only_build_has_no_fabric() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let tree = std::process::Command::new(cargo)
        .current_dir(root())
        .args(["tree", "--offline", "-p", "stampede", "--no-default-features", "-e", "normal", "--prefix", "none"])
        .output()
        .expect("cargo tree runs");
    assert!(tree.status.success(), "cargo tree: {}", String::from_utf8_lossy(&tree.stderr));
    let tree = String::from_utf8(tree.stdout).expect("cargo tree's output is text");
    assert!(tree.lines().any(|line| line.starts_with("stampede-engine ")), "the walk saw the engine:\n{tree}");
    let fabric: Vec<&str> =
        tree.lines().filter(|line| line.starts_with("zenoh") || line.starts_with("stampede-wire ")).collect();
    assert!(fabric.is_empty(), "an embedded-only build pulls in {fabric:?}");
}
