//! Access control on a node (docs/SECURITY.md): users with passwords, and per user the name
//! prefixes they may read, write and create under. Loaded from a TOML policy file:
//!
//! ```toml
//! [users.camera]
//! password = "$argon2id$v=19$m=19456,t=2,p=1$..."   # `stampede hash-password`
//! create = ["camera"]          # create (and destroy) channels and queues under camera/
//! write = ["camera"]           # attach outputs: put
//! read = []
//!
//! [users.display]
//! password = "$argon2id$..."
//! read = ["camera", "tracker"] # attach inputs: get
//! ```
//!
//! Any right on a name lets a user look it up and see it listed (names and limits, never items).
//! A prefix selects names as `names(prefix)` does: `"camera"` is `camera` and every name under
//! `camera/`; `""` is every name. Passwords are stored as Argon2 PHC strings only.
//!
//! **Guarantees.** On a node with a policy, a session opens only with a listed user and its
//! password (else `PermissionDenied` with right `"connect"`); every request naming a container
//! is checked against that user's rights before anything is done, and a refusal is
//! `PermissionDenied` naming the name and the right — never data. Listings show only readable
//! names. Requests prove their session with a secret the node hands out at opening
//! ([`new_secret`]), since session ids are visible on the fabric.
//!
//! Why not zenoh's access control alone: a node answers every request on one key expression
//! (`stampede/<node>/rpc`), and the names a request touches are in its payload, which zenoh's rules
//! (per key expression and user) cannot see. Zenoh's TLS (and mutual TLS) secure the links; this
//! module decides, per request, what a user may do with a name.

use std::collections::BTreeMap;
use std::path::Path;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use serde::Deserialize;
use stampede_core::name::under;
use stampede_core::{Error, Result};
use stampede_wire::Secret;

/// Largest policy file read.
pub const POLICY_BYTES_MAX: u64 = 1 << 20;

pub use stampede_engine::session::Right;

/// The users a node admits and what each may do.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct AccessPolicy {
    users: BTreeMap<String, UserEntry>,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct UserEntry {
    /// An Argon2 PHC string.
    password: String,
    #[serde(default)]
    read: Vec<String>,
    #[serde(default)]
    write: Vec<String>,
    #[serde(default)]
    create: Vec<String>,
}

/// One authenticated user's rights, held by its sessions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rights {
    pub user: String,
    read: Vec<String>,
    write: Vec<String>,
    create: Vec<String>,
}

impl AccessPolicy {
    /// Reads and checks a policy file: `InvalidArgument` naming the file and what is wrong.
    pub fn load(path: &Path) -> Result<AccessPolicy> {
        let refuse = |reason: String| Error::InvalidArgument { op: "access", name: path.display().to_string(), reason };
        let size = std::fs::metadata(path).map_err(|e| refuse(format!("cannot read the policy file: {e}")))?.len();
        if size > POLICY_BYTES_MAX {
            return Err(refuse(format!("{size} bytes: a policy file is at most {POLICY_BYTES_MAX}")));
        }
        let text = std::fs::read_to_string(path).map_err(|e| refuse(format!("cannot read the policy file: {e}")))?;
        AccessPolicy::parse(&text).map_err(refuse)
    }

    /// The policy in a canonical encoding: what nodes of a mesh compare (its digest, in their
    /// hellos) and derive their mesh payloads' key from. Its users are a sorted map, and postcard
    /// encodes by position, so equal policies encode alike whatever their files' layout.
    pub(crate) fn canonical(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("a policy is plain data")
    }

    /// Parses a policy (the file's text); the reason if it is not one.
    pub fn parse(text: &str) -> std::result::Result<AccessPolicy, String> {
        let policy: AccessPolicy = toml::from_str(text).map_err(|e| format!("not a policy: {e}"))?;
        for (user, entry) in &policy.users {
            PasswordHash::new(&entry.password).map_err(|e| {
                format!("user {user:?}: password is not an Argon2 hash ({e}); make one with `stampede hash-password`")
            })?;
        }
        Ok(policy)
    }

    /// The rights of `user` if `password` is theirs; `PermissionDenied` (right `connect`)
    /// otherwise, the same for an unknown user as for a wrong password.
    pub fn authenticate(&self, node: &str, user: Option<&str>, password: Option<&str>) -> Result<Rights> {
        let denied = |reason: &str| Error::PermissionDenied {
            op: "connect",
            name: node.to_owned(),
            right: "connect",
            reason: reason.to_owned(),
        };
        let (Some(user), Some(password)) = (user, password) else {
            return Err(denied("this node admits only its users: connect with a user and password"));
        };
        let entry = self.users.get(user);
        let verified = entry.is_some_and(|entry| {
            PasswordHash::new(&entry.password)
                .is_ok_and(|hash| Argon2::default().verify_password(password.as_bytes(), &hash).is_ok())
        });
        match entry {
            Some(entry) if verified => Ok(Rights {
                user: user.to_owned(),
                read: entry.read.clone(),
                write: entry.write.clone(),
                create: entry.create.clone(),
            }),
            _ => Err(denied("unknown user or wrong password")),
        }
    }
}

impl Rights {
    /// Whether the right is given on `name`.
    pub fn allows(&self, right: Right, name: &str) -> bool {
        let prefixes = match right {
            Right::Read => &self.read,
            Right::Write => &self.write,
            Right::Create => &self.create,
        };
        prefixes.iter().any(|prefix| under(name, prefix))
    }

    /// Whether any right is given on `name` (it may be looked up and listed).
    pub fn sees(&self, name: &str) -> bool {
        [Right::Read, Right::Write, Right::Create].into_iter().any(|right| self.allows(right, name))
    }

    /// `Ok` if the right is given on `name`, else `PermissionDenied` naming both.
    pub fn check(&self, op: &'static str, right: Right, name: &str) -> Result<()> {
        if self.allows(right, name) {
            return Ok(());
        }
        let reason = format!(
            "user {:?} has no {} right on this name (the node's access policy gives rights per name prefix)",
            self.user,
            right.as_str()
        );
        Err(Error::PermissionDenied { op, name: name.to_owned(), right: right.as_str(), reason })
    }
}

/// A password's Argon2id PHC string, for a policy file.
pub fn hash_password(password: &str) -> std::result::Result<String, String> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| format!("no randomness for the salt: {e}"))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| e.to_string())?;
    Argon2::default().hash_password(password.as_bytes(), &salt).map(|hash| hash.to_string()).map_err(|e| e.to_string())
}

/// A new session secret: random bytes from the operating system.
pub fn new_secret() -> std::result::Result<Secret, String> {
    let mut secret = Secret::default();
    getrandom::fill(&mut secret).map_err(|e| format!("no randomness for the session's secret: {e}"))?;
    Ok(secret)
}

/// Compares secrets in time independent of where they differ.
pub fn same_secret(a: &Secret, b: &Secret) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> AccessPolicy {
        let camera = hash_password("cam-pass").unwrap();
        let display = hash_password("disp-pass").unwrap();
        AccessPolicy::parse(&format!(
            "[users.camera]\npassword = \"{camera}\"\ncreate = [\"camera\"]\nwrite = [\"camera\"]\n\n\
             [users.display]\npassword = \"{display}\"\nread = [\"camera\", \"tracker/\"]\n"
        ))
        .unwrap()
    }

    #[test]
    fn users_are_admitted_with_their_password_only() {
        let p = policy();
        assert_eq!(p.authenticate("n", Some("camera"), Some("cam-pass")).unwrap().user, "camera");
        for (user, password) in [(Some("camera"), Some("disp-pass")), (Some("nobody"), Some("x")), (None, None)] {
            let e = p.authenticate("n", user, password).unwrap_err();
            assert!(matches!(e, Error::PermissionDenied { right: "connect", .. }), "{e}");
        }
    }

    #[test]
    fn rights_follow_name_prefixes() {
        let display = policy().authenticate("n", Some("display"), Some("disp-pass")).unwrap();
        assert!(display.allows(Right::Read, "camera"));
        assert!(display.allows(Right::Read, "camera/frames"));
        assert!(!display.allows(Right::Read, "cameras"), "a prefix is a whole segment");
        assert!(display.allows(Right::Read, "tracker/boxes"));
        assert!(!display.allows(Right::Write, "camera/frames"));
        let e = display.check("attach_output", Right::Write, "camera/frames").unwrap_err();
        assert_eq!(e.to_string(), "attach_output on \"camera/frames\": permission denied: user \"display\" has no write right on this name (the node's access policy gives rights per name prefix)");
    }

    #[test]
    fn bad_policies_say_what_is_wrong() {
        assert!(AccessPolicy::parse("[users.x]\npassword = \"plain\"\n").unwrap_err().contains("hash-password"));
        assert!(AccessPolicy::parse("[users.x]\npasword = \"a\"\n").unwrap_err().contains("not a policy"));
        assert!(AccessPolicy::parse("users = 3").is_err());
    }
}
