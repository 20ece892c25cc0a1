//! Which web pages may open a WebSocket of Stampede's — the dashboard's (`GET /ws`) and a node's
//! (`--websocket`). A browser sends `Origin` — the scheme, host and port of the page that asks —
//! with every WebSocket upgrade, and lets any page the user visits try one: without this rule, a
//! page on the web could read a dashboard or a node on the user's loopback. Pure: the handler
//! passes the request's headers in.
//!
//! The rule ([`admits`]):
//! - no `Origin`: not a browser (a script, a test) — admitted; a login, if any, still applies;
//! - an origin on the allow-list (`--allow-origin`: `DashboardOptions::allowed_origins`,
//!   `NodeOptions::allowed_origins`) — admitted;
//! - the server's own page (`Origin` is `http://` plus the request's `Host`; the dashboard's, a
//!   node serves none) — admitted, but
//!   on a loopback listener only when `Host` names loopback (`127.x.y.z`, `localhost`, `[::1]`):
//!   a page whose name an attacker rebinds to 127.0.0.1 is not the dashboard's own;
//! - anything else: refused `403`, naming the origin and how to allow it.

use crate::fabric;

/// Whether a WebSocket upgrade with `origin` and `host` headers may open, on a server that
/// listens on loopback or not and serves its own page at `host` or not (`None`), with `allowed`
/// origins besides; else why not.
pub fn admits(origin: Option<&str>, host: Option<&str>, loopback: bool, allowed: &[String]) -> Result<(), String> {
    let Some(origin) = origin.map(|o| o.trim_end_matches('/')) else { return Ok(()) };
    if allowed.iter().any(|a| a.trim_end_matches('/').eq_ignore_ascii_case(origin)) {
        return Ok(());
    }
    let own = host.is_some_and(|host| {
        origin.eq_ignore_ascii_case(&format!("http://{host}")) && (!loopback || fabric::names_loopback(host))
    });
    if own {
        return Ok(());
    }
    Err(format!(
        "a page at {origin} may not open this WebSocket; allow it with --allow-origin {origin} \
         (Python: allowed_origins=[...])"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_own_page_and_the_allowed_origins_open_it_others_do_not() {
        let host = Some("127.0.0.1:8080");
        assert!(admits(None, host, true, &[]).is_ok(), "not a browser");
        assert!(admits(Some("http://127.0.0.1:8080"), host, true, &[]).is_ok(), "its own page");
        assert!(admits(Some("http://localhost:8080"), Some("localhost:8080"), true, &[]).is_ok());
        assert!(admits(Some("http://[::1]:8080"), Some("[::1]:8080"), true, &[]).is_ok());
        let refused = admits(Some("http://evil.example"), host, true, &[]).unwrap_err();
        assert!(refused.contains("--allow-origin http://evil.example"), "{refused}");
        let allowed = ["https://viewer.example/".to_owned()];
        assert!(admits(Some("https://viewer.example"), host, true, &allowed).is_ok(), "on the allow-list");
        assert!(admits(Some("http://127.0.0.1:9999"), host, true, &[]).is_err(), "another port is another page");
    }

    /// A name an attacker points at 127.0.0.1 makes its page's origin match `Host`: not the
    /// dashboard's own page on a loopback listener, which is what its users open.
    #[test]
    fn a_rebound_name_is_not_the_own_page_on_loopback() {
        let rebound = Some("attacker.example:8080");
        assert!(admits(Some("http://attacker.example:8080"), rebound, true, &[]).is_err());
        assert!(
            admits(Some("http://kiosk.lan:8080"), Some("kiosk.lan:8080"), false, &[]).is_ok(),
            "listening beyond loopback"
        );
    }
}
