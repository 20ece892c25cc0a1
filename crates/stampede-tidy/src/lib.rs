//! The house rules of this repository, checked mechanically (TigerBeetle's "tidy"): each rule is a
//! function over the repository's files that returns its violations, one line each, naming the
//! file and what to do. `tests/tidy.rs` runs them over the repository; the unit tests below show
//! that each rule catches what it should.
//!
//! The rules:
//! - No Rust source under `crates/*/src` above [`SOURCE_LINES_MAX`] lines (a file marked
//!   `@generated` in its first lines excepted): split it by what it holds.
//! - Every Rust module under `crates/*/src` starts with a `//!` module doc.
//! - `unsafe` lives where it is allowed: `stampede-core` and the facade (`stampede`) forbid it;
//!   the engine (`stampede-engine`) and `stampede-wire` deny it, with the engine's OS calls in one
//!   module that allows it, and every `unsafe` block there has a `SAFETY:` comment above it.
//! - No `sleep` in a Rust test without a comment, on its line or right above it, saying why a
//!   condition cannot be awaited instead (a sleep is a guess at a duration; the suite runs on
//!   slow, loaded machines).
//! - The repository stands alone: no reference to the product specification, which its readers
//!   do not have; a rule is cited by the repository's own doc that states it.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

/// Longest Rust source file under `crates/*/src`, in lines.
pub const SOURCE_LINES_MAX: usize = 600;

/// How many lines above an `unsafe` block its `SAFETY:` comment may start.
pub const SAFETY_LINES_ABOVE_MAX: usize = 8;

/// A Rust file of the repository: its path relative to the root, and its text.
pub struct Source {
    pub path: PathBuf,
    pub text: String,
}

/// Every `.rs` file under `dir` (recursively), read; paths relative to `root`.
pub fn rust_files(root: &Path, dir: &Path) -> std::io::Result<Vec<Source>> {
    files(root, dir, &["rs"])
}

/// Every file under `dir` (recursively) whose extension is one of `extensions`, read; paths
/// relative to `root`.
pub fn files(root: &Path, dir: &Path, extensions: &[&str]) -> std::io::Result<Vec<Source>> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| extensions.iter().any(|x| e == *x)) {
                let text = std::fs::read_to_string(&path)?;
                let path = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
                found.push(Source { path, text });
            }
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(found)
}

/// Sources longer than [`SOURCE_LINES_MAX`] lines, but generated ones.
pub fn too_long(sources: &[Source]) -> Vec<String> {
    sources
        .iter()
        .filter(|s| !s.text.lines().take(5).any(|line| line.contains("@generated")))
        .filter_map(|s| {
            let lines = s.text.lines().count();
            (lines > SOURCE_LINES_MAX).then(|| {
                format!(
                    "{}: {lines} lines, more than SOURCE_LINES_MAX={SOURCE_LINES_MAX}: split it into files named for \
                     what they hold",
                    s.path.display()
                )
            })
        })
        .collect()
}

/// Sources that do not start with a `//!` module doc.
pub fn undocumented(sources: &[Source]) -> Vec<String> {
    sources
        .iter()
        .filter(|s| !s.text.trim_start().starts_with("//!"))
        .map(|s| {
            format!(
                "{}: no module doc: start it with `//!` lines saying what it holds and guarantees",
                s.path.display()
            )
        })
        .collect()
}

/// `unsafe` blocks without a `SAFETY:` comment within [`SAFETY_LINES_ABOVE_MAX`] lines above.
pub fn unsafe_without_safety(sources: &[Source]) -> Vec<String> {
    let mut found = Vec::new();
    for s in sources {
        let lines: Vec<&str> = s.text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if !code.contains("unsafe {") && !code.contains("unsafe{") {
                continue;
            }
            let above = &lines[i.saturating_sub(SAFETY_LINES_ABOVE_MAX)..i];
            if !above.iter().any(|l| l.trim_start().starts_with("// SAFETY:")) {
                found.push(format!(
                    "{}:{}: an `unsafe` block without a `// SAFETY:` comment above it",
                    s.path.display(),
                    i + 1
                ));
            }
        }
    }
    found
}

/// Sources of a crate that denies `unsafe` and use it outside the one module allowed to.
pub fn unsafe_outside(sources: &[Source], allowed: &[&Path]) -> Vec<String> {
    sources
        .iter()
        .filter(|s| !allowed.contains(&s.path.as_path()))
        .filter(|s| s.text.lines().any(|line| line.split("//").next().unwrap_or("").contains("unsafe {")))
        .map(|s| format!("{}: `unsafe` outside the module allowed it: move the call there", s.path.display()))
        .collect()
}

/// `sleep(` calls in test code without a comment on their line or on the comment lines right
/// above.
pub fn unexplained_sleeps(sources: &[Source]) -> Vec<String> {
    let mut found = Vec::new();
    for s in sources {
        let lines: Vec<&str> = s.text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let (code, comment) = line.split_once("//").unwrap_or((line, ""));
            if !code.contains("sleep(") || code.trim_start().starts_with("fn ") {
                continue;
            }
            let explained_above = i > 0 && lines[i - 1].trim_start().starts_with("//");
            if comment.trim().is_empty() && !explained_above {
                found.push(format!(
                    "{}:{}: a sleep without a comment saying why a condition cannot be awaited (or await one: \
                     support::eventually)",
                    s.path.display(),
                    i + 1
                ));
            }
        }
    }
    found
}

/// Sources that cite the product specification (`SPEC §…`, `SPEC.md`) instead of the
/// repository's own docs.
pub fn spec_references(sources: &[Source]) -> Vec<String> {
    let mut found = Vec::new();
    for s in sources {
        for (i, line) in s.text.lines().enumerate() {
            if line.contains("SPEC §") || line.contains("SPEC.md") {
                found.push(format!(
                    "{}:{}: cites the specification, which readers of the repository do not have: cite the repository's \
                     doc that states the rule (docs/SEMANTICS.md and its neighbours)",
                    s.path.display(),
                    i + 1
                ));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(path: &str, text: &str) -> Source {
        Source { path: PathBuf::from(path), text: text.to_owned() }
    }

    #[test]
    fn each_rule_catches_what_it_should() {
        let long = "//! doc\n".to_owned() + &"x\n".repeat(SOURCE_LINES_MAX);
        assert_eq!(too_long(&[source("a.rs", &long)]).len(), 1);
        assert!(too_long(&[source("a.rs", &format!("// @generated\n{long}"))]).is_empty());
        assert_eq!(undocumented(&[source("a.rs", "use x;\n")]).len(), 1);
        assert!(undocumented(&[source("a.rs", "\n//! doc\n")]).is_empty());
        assert_eq!(unsafe_without_safety(&[source("a.rs", "fn f() {\n    unsafe { g() }\n}\n")]).len(), 1);
        assert!(unsafe_without_safety(&[source("a.rs", "// SAFETY: g has none.\nunsafe { g() }\n")]).is_empty());
        assert_eq!(unsafe_outside(&[source("a.rs", "unsafe { g() }\n")], &[Path::new("os.rs")]).len(), 1);
        assert!(unsafe_outside(&[source("os.rs", "unsafe { g() }\n")], &[Path::new("os.rs")]).is_empty());
        assert_eq!(unexplained_sleeps(&[source("t.rs", "    sleep(D);\n")]).len(), 1);
        assert!(unexplained_sleeps(&[source("t.rs", "    sleep(D); // nothing to await: a pause\n")]).is_empty());
        assert!(unexplained_sleeps(&[source("t.rs", "    // nothing to await\n    sleep(D);\n")]).is_empty());
        assert_eq!(spec_references(&[source("a.md", &format!("as {} says", ["SPEC", "§2"].join(" ")))]).len(), 1);
        assert!(spec_references(&[source("a.md", "as docs/SEMANTICS.md says")]).is_empty());
    }
}
