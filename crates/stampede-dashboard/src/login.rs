//! The login ([`Dashboard::serve_with_login`](crate::Dashboard::serve_with_login)): HTTP Basic
//! authentication in front of every route.
//!
//! **Guarantees.** With a login, no route answers with data — not the page, its assets,
//! `/api/snapshot`, nor the `/ws` upgrade — unless the request carries `Authorization: Basic
//! base64(user:password)` that the login function accepts; any other request (no header, a
//! header longer than [`AUTHORIZATION_BYTES_MAX`], not Basic, not base64, not UTF-8, no `:`, or
//! credentials refused) is answered `401 Unauthorized` with `WWW-Authenticate: Basic
//! realm="stampede"` and no data. The same answer for an unknown user, a wrong password and a
//! user without the right, so it does not tell which users exist.
//!
//! The login function may be slow (Argon2): it runs on the server's blocking threads (at most two
//! at once), never on its one worker thread. Accepted credentials are remembered — as salted
//! BLAKE2s hashes, never in clear; the salt is random per dashboard — at most
//! [`LOGINS_CACHED`] of them (the oldest forgotten first), so that a page refreshing every 200 ms
//! does not run Argon2 each time. Refused credentials are not remembered: each try runs the login
//! function again. What was accepted stays accepted until the dashboard closes.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use blake2::{Blake2s256, Digest};

use crate::{Login, AUTHORIZATION_BYTES_MAX, LOGINS_CACHED};

/// What a refused request gets in `WWW-Authenticate`.
const CHALLENGE: &str = "Basic realm=\"stampede\"";

/// A hash of accepted credentials.
type Hash = [u8; 32];

/// The login function and the credentials it accepted.
pub(crate) struct Gate {
    login: Login,
    /// Random per dashboard, hashed before the credentials.
    salt: [u8; 32],
    /// Hashes of accepted credentials, oldest first; at most [`LOGINS_CACHED`].
    accepted: Mutex<VecDeque<Hash>>,
}

impl Gate {
    /// A gate in front of `login`; the reason if there is no randomness for its salt.
    pub(crate) fn new(login: Login) -> Result<Gate, String> {
        let mut salt = [0u8; 32];
        getrandom::fill(&mut salt).map_err(|e| format!("no randomness for the login's salt: {e}"))?;
        Ok(Gate { login, salt, accepted: Mutex::new(VecDeque::with_capacity(LOGINS_CACHED)) })
    }

    fn hash(&self, credentials: &[u8]) -> Hash {
        let digest = Blake2s256::new().chain_update(self.salt).chain_update(credentials).finalize();
        let mut hash = [0u8; 32];
        hash.copy_from_slice(&digest);
        hash
    }

    fn accepted(&self) -> std::sync::MutexGuard<'_, VecDeque<Hash>> {
        self.accepted.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether the `Authorization` header's credentials may see the dashboard.
    async fn admits(self: &Arc<Self>, authorization: Option<&HeaderValue>) -> bool {
        let Some((user, password)) = authorization.and_then(credentials) else { return false };
        let hash = self.hash(format!("{user}:{password}").as_bytes());
        if self.accepted().contains(&hash) {
            return true;
        }
        let gate = self.clone();
        let checked = tokio::task::spawn_blocking(move || (gate.login)(&user, &password)).await;
        // A login function that panicked admits no one.
        if !matches!(checked, Ok(true)) {
            return false;
        }
        let mut accepted = self.accepted();
        if !accepted.contains(&hash) {
            if accepted.len() == LOGINS_CACHED {
                accepted.pop_front();
            }
            accepted.push_back(hash);
        }
        true
    }
}

/// User and password from `Basic base64(user:password)`; `None` for anything else.
pub(crate) fn credentials(header: &HeaderValue) -> Option<(String, String)> {
    let value = header.as_bytes();
    if value.len() > AUTHORIZATION_BYTES_MAX {
        return None;
    }
    let value = std::str::from_utf8(value).ok()?.trim();
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// The middleware: the request goes on if its credentials are admitted, else `401`.
pub(crate) async fn require(
    axum::extract::State(gate): axum::extract::State<Arc<Gate>>,
    request: Request,
    next: Next,
) -> Response {
    if gate.admits(request.headers().get(header::AUTHORIZATION)).await {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, CHALLENGE), (header::CACHE_CONTROL, "no-store")],
        "log in to see this dashboard\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: &str) -> Option<(String, String)> {
        credentials(&HeaderValue::from_str(value).unwrap())
    }

    #[test]
    fn basic_credentials_are_parsed_and_anything_else_is_refused() {
        let encoded = base64::engine::general_purpose::STANDARD.encode("ann:pa:ss");
        assert_eq!(parse(&format!("Basic {encoded}")), Some(("ann".into(), "pa:ss".into())));
        assert_eq!(parse(&format!("basic  {encoded} ")), Some(("ann".into(), "pa:ss".into())));
        assert_eq!(parse(&format!("Bearer {encoded}")), None);
        assert_eq!(parse("Basic not*base64"), None);
        assert_eq!(parse(&format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("nocolon"))), None);
        assert_eq!(parse("Basic"), None);
        let long = base64::engine::general_purpose::STANDARD.encode(format!("ann:{}", "x".repeat(4096)));
        assert_eq!(parse(&format!("Basic {long}")), None, "longer than AUTHORIZATION_BYTES_MAX");
    }
}
