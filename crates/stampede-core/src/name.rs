//! Names of channels and queues (docs/SEMANTICS.md, "Names"; docs/NODES.md, "The name service"):
//! what a valid name is, and how a prefix selects names hierarchically.
//!
//! A name is one or more `/`-separated **segments**; each segment is non-empty, made of ASCII
//! letters, digits and `_ - . :`, and is neither `.` nor `..`. So no `*`, `$`, `?`, `#`,
//! whitespace or control characters (names become key expressions on the fabric), no empty
//! segment, no leading or trailing `/`. At most [`NAME_BYTES_MAX`] bytes.
//!
//! A prefix selects hierarchically ([`under`]): `""` selects every name; a prefix ending in `/`
//! selects the names under it (`"camera/"` selects `camera/left`, not `cameraX`); any other
//! prefix selects that name itself and the names under it (`"camera"` selects `camera` and
//! `camera/left`, not `cameras`).

use crate::error::{Error, Result};

/// Longest name, in bytes.
pub const NAME_BYTES_MAX: usize = 256;

/// The characters a segment may hold besides ASCII letters and digits.
const SEGMENT_PUNCTUATION: &[u8] = b"_-.:";

/// Checks `name` against the rule above; `InvalidArgument` from `op` naming the broken rule
/// otherwise.
pub fn check_name(op: &'static str, name: &str) -> Result<()> {
    let broken = |rule: String| Error::InvalidArgument { op, name: printable(name), reason: rule };
    if name.len() > NAME_BYTES_MAX {
        return Err(broken(format!(
            "a name is at most NAME_BYTES_MAX={NAME_BYTES_MAX} bytes, this one has {}",
            name.len()
        )));
    }
    for segment in name.split('/') {
        if segment.is_empty() {
            return Err(broken(
                "a name is '/'-separated non-empty segments (no empty name, no leading, trailing or double '/'), \
                 e.g. \"camera/left\""
                    .into(),
            ));
        }
        if segment == "." || segment == ".." {
            return Err(broken(format!("a segment may not be \"{segment}\"")));
        }
        if let Some(c) = segment.chars().find(|&c| !is_segment_char(c)) {
            return Err(broken(format!(
                "{c:?} is not allowed: segments are ASCII letters, digits and '_', '-', '.', ':' (no '*', '$', '?', \
                 '#', whitespace or control characters)"
            )));
        }
    }
    Ok(())
}

/// `true` when `prefix` selects `name` (see the module doc).
pub fn under(name: &str, prefix: &str) -> bool {
    if prefix.is_empty() || prefix.ends_with('/') {
        return name.starts_with(prefix);
    }
    name.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn is_segment_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || (c.is_ascii() && SEGMENT_PUNCTUATION.contains(&(c as u8)))
}

/// The name as shown in an error: control characters escaped, cut at [`NAME_BYTES_MAX`] bytes
/// (a hostile name must not flood a log line).
fn printable(name: &str) -> String {
    let mut shown: String = name.escape_debug().collect();
    if shown.len() > NAME_BYTES_MAX {
        let cut = (0..=NAME_BYTES_MAX).rev().find(|&i| shown.is_char_boundary(i)).unwrap_or(0);
        shown.truncate(cut);
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule of docs/SEMANTICS.md, "Names": segments of letters, digits and `_ - . :`, nothing
    /// else, bounded.
    #[test]
    fn names_follow_the_segment_rule() {
        for good in ["camera", "camera/left", "a.b/c-d/e_f:1", "x/..z/y"] {
            assert!(check_name("create", good).is_ok(), "{good}");
        }
        let long = "a".repeat(NAME_BYTES_MAX + 1);
        for bad in ["", "/a", "a/", "a//b", "a/./b", "..", "a b", "a*", "a$", "a?", "a#", "a\n", "é", long.as_str()] {
            assert!(matches!(check_name("create", bad), Err(Error::InvalidArgument { .. })), "{bad:?}");
        }
        assert!(check_name("create", &"a".repeat(NAME_BYTES_MAX)).is_ok());
    }

    /// Prefixes select hierarchically, never by raw string prefix.
    #[test]
    fn prefixes_select_whole_segments() {
        assert!(under("camera/left", "camera/") && !under("cameraX", "camera/") && !under("camera", "camera/"));
        assert!(under("camera", "camera") && under("camera/left", "camera") && !under("cameras", "camera"));
        assert!(under("anything", ""));
    }
}
