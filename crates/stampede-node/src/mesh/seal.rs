//! Mesh messages only from nodes, whatever the authentication: on a node with an access policy,
//! every payload on the mesh's keys — batches, snapshots and door messages, decline and owns
//! questions and their answers, clock readings, name listings — carries a tag (keyed BLAKE2s,
//! 32 bytes) under a key derived from the policy every node of the mesh serves (checked at join,
//! docs/SECURITY.md). A client does not hold the policy file, so it cannot make a payload a node
//! takes: a forged release, pause answer or decline is dropped and counted as malformed. Without
//! a policy (every endpoint loopback, or `--allow-anonymous`) payloads go as they are.
//!
//! **Guarantees.** [`open`](Seal::open) returns a payload only when its tag verifies (compared in
//! constant time); anything shorter than a tag, or with another, is refused. The key is not the
//! policy's published digest (the hello shows that one): it is derived from the policy's bytes
//! under its own context, so the digest does not give it away. What this does not cover:
//! liveliness tokens carry no payload, so a client can still declare a token on the mesh's keys
//! (a member that never answers, declared dead after the liveliness timeout) — only
//! `--mesh-node-cn` with mutual TLS closes the keys to clients entirely.

use blake2::digest::{KeyInit, Mac};
use blake2::{Blake2s256, Blake2sMac256, Digest};

use crate::access::AccessPolicy;

/// Bytes of a tag.
pub(crate) const TAG_BYTES: usize = 32;
/// What the key is derived under (never the hello's digest, which is public).
const KEY_CONTEXT: &[u8] = b"stampede mesh payload key v1\0";

/// The tagging of a node's mesh payloads: `None` without an access policy.
#[derive(Clone, Debug)]
pub(crate) struct Seal {
    key: Option<[u8; 32]>,
}

impl Seal {
    /// The seal of a node serving `policy` (`None`: payloads go untagged).
    pub(crate) fn of(policy: Option<&AccessPolicy>) -> Seal {
        // The bytes the hello's digest is made of (`join.rs`), under another context.
        let key = policy.map(|policy| {
            Blake2s256::new().chain_update(KEY_CONTEXT).chain_update(policy.canonical()).finalize().into()
        });
        Seal { key }
    }

    fn mac(key: &[u8; 32], payload: &[u8]) -> Blake2sMac256 {
        let mut mac = <Blake2sMac256 as KeyInit>::new_from_slice(key).expect("a 32-byte key fits");
        mac.update(payload);
        mac
    }

    /// `payload` with its tag appended (as it is, without a key).
    pub(crate) fn seal(&self, mut payload: Vec<u8>) -> Vec<u8> {
        if let Some(key) = &self.key {
            let tag = Self::mac(key, &payload).finalize().into_bytes();
            payload.extend_from_slice(&tag);
        }
        payload
    }

    /// The payload of `sealed` if its tag verifies (all of it, without a key); `None` else.
    pub(crate) fn open<'a>(&self, sealed: &'a [u8]) -> Option<&'a [u8]> {
        let Some(key) = &self.key else { return Some(sealed) };
        let split = sealed.len().checked_sub(TAG_BYTES)?;
        let (payload, tag) = sealed.split_at(split);
        Self::mac(key, payload).verify_slice(tag).ok().map(|()| payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(password: &str) -> AccessPolicy {
        let hash = crate::access::hash_password(password).expect("a hash");
        AccessPolicy::parse(&format!("[users.camera]\npassword = \"{hash}\"\nwrite = [\"camera\"]\n"))
            .expect("a policy")
    }

    #[test]
    fn only_a_node_serving_the_same_policy_opens_a_sealed_payload() {
        let mine = policy("a");
        let (a, same, other) = (Seal::of(Some(&mine)), Seal::of(Some(&mine.clone())), Seal::of(Some(&policy("a"))));
        let sealed = a.seal(b"release 7".to_vec());
        assert_eq!(same.open(&sealed), Some(&b"release 7"[..]));
        assert_eq!(other.open(&sealed), None, "another policy's key (the same password, another salt)");
        assert_eq!(Seal::of(None).open(&sealed).map(<[u8]>::len), Some(sealed.len()), "no policy: as it is");
        let mut forged = sealed.clone();
        forged[0] ^= 1;
        assert_eq!(a.open(&forged), None, "a payload changed");
        assert_eq!(a.open(b"short"), None, "shorter than a tag");
        assert_eq!(a.open(b"release 7"), None, "untagged");
    }
}
