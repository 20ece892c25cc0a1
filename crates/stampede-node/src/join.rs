//! A node joins a mesh only if it speaks the wire version and serves the access policy of every
//! node already there (docs/SECURITY.md, "One policy, one version, one mesh"): a client's rights
//! must not depend on which node its request reaches, and a node of another version could not
//! understand the others' requests.
//!
//! Every node holds a liveliness token, its hello ([`fabric::hello_key`]):
//! `stampede/<node>/hello/<wire version>/<policy>`, the policy being the hex digest (BLAKE2s of the
//! policy in a canonical encoding) or `none`. A liveliness token travels with the node's first
//! declarations, so a node starting sees the others' at once (a queryable's declaration may come
//! later than the first query). A starting node reads every hello it reaches, before it declares
//! anything of its own, and refuses to start on the first difference, naming both sides. It waits
//! at most [`HELLO_WAIT`] for them.

use std::time::Duration;

use blake2::{Blake2s256, Digest};
use stampede_core::{Error, Result};
use stampede_wire::{fabric, VERSION};
use zenoh::liveliness::LivelinessToken;
use zenoh::Wait;

use crate::access::AccessPolicy;

/// Longest a starting node waits for the other nodes' hellos.
pub const HELLO_WAIT: Duration = Duration::from_secs(2);
/// Most hellos a starting node reads (a mesh of more nodes is checked against these).
const HELLOS_MAX: usize = 1024;

/// What a node says of itself to a node joining.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hello {
    pub version: u8,
    /// The hex digest of the node's access policy (BLAKE2s); `none` without one.
    pub policy: String,
}

impl Hello {
    /// This node's hello: this build's wire version and `policy`'s digest.
    pub(crate) fn of(policy: Option<&AccessPolicy>) -> Hello {
        let policy = policy.map_or("none".to_owned(), |policy| {
            Blake2s256::digest(policy.canonical()).iter().map(|b| format!("{b:02x}")).collect()
        });
        Hello { version: VERSION, policy }
    }

    /// `Ok` when a node whose hello is `theirs` (node `node`) and this one may share a mesh;
    /// else why not, naming both.
    pub(crate) fn agrees(&self, theirs: &Hello, node: &str) -> std::result::Result<(), String> {
        if theirs.version != self.version {
            return Err(format!(
                "node {node} speaks wire version {} and this node {}: every node of a mesh runs the same \
                 stampede version (upgrade them together)",
                theirs.version, self.version
            ));
        }
        if theirs.policy != self.policy {
            let show = |policy: &str| match policy {
                "none" => "no access policy".to_owned(),
                digest => format!("access policy {}", &digest[..digest.len().min(8)]),
            };
            return Err(format!(
                "node {node} serves {} and this node {}: every node of a mesh serves the same --access policy \
                 file (a user's rights must not depend on the node a request reaches)",
                show(&theirs.policy),
                show(&self.policy)
            ));
        }
        Ok(())
    }
}

/// Reads every hello `zenoh` reaches; `Err` (`InvalidArgument`, naming the first node that
/// differs and both sides) when one does not agree with `own`.
pub(crate) fn check(zenoh: &zenoh::Session, name: &str, own: &Hello) -> Result<()> {
    let refused = |reason: String| Error::InvalidArgument { op: "serve", name: name.to_owned(), reason };
    let Ok(replies) = zenoh.liveliness().get(fabric::HELLO_KEYS).timeout(HELLO_WAIT).wait() else { return Ok(()) };
    for reply in replies.iter().take(HELLOS_MAX) {
        let Ok(sample) = reply.result() else { continue };
        let Some((node, version, policy)) = fabric::parse_hello(sample.key_expr().as_str()) else { continue };
        if node != name {
            own.agrees(&Hello { version, policy: policy.to_owned() }, node).map_err(refused)?;
        }
    }
    Ok(())
}

/// Holds this node's hello on the fabric until dropped.
pub(crate) fn declare(zenoh: &zenoh::Session, name: &str, own: &Hello) -> zenoh::Result<LivelinessToken> {
    zenoh.liveliness().declare_token(fabric::hello_key(name, own.version, &own.policy)).wait()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Same version and policy: agreed; another version or policy: refused, naming both.
    #[test]
    fn hellos_agree_only_on_version_and_policy() {
        let none = Hello::of(None);
        assert_eq!(none.agrees(&none, "b"), Ok(()));
        let key = fabric::hello_key("b", none.version, &none.policy);
        assert_eq!(fabric::parse_hello(&key), Some(("b", VERSION, "none")));
        let older = Hello { version: VERSION - 1, policy: "none".into() };
        let refused = none.agrees(&older, "b").unwrap_err();
        assert!(refused.contains(&format!("version {} and this node {VERSION}", VERSION - 1)), "{refused}");
        let policy = Hello { version: VERSION, policy: "0707070707070707".into() };
        let refused = none.agrees(&policy, "b").unwrap_err();
        assert!(refused.contains("serves access policy 07070707 and this node no access policy"), "{refused}");
        assert_eq!(fabric::parse_hello("stampede/b/hello/x/none"), None);
        assert_eq!(fabric::parse_hello("stampede/b/alive"), None);
    }
}
