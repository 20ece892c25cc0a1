//! The page, compiled into the binary (`web/`): plain HTML, JavaScript and CSS, no CDN and no
//! build step, so the dashboard works on a machine without internet.

/// `GET /`.
pub(crate) const INDEX_HTML: &str = include_str!("../web/index.html");
/// `GET /dashboard.js`: connects to `/ws`, draws the frame, overlays, graph and tables.
pub(crate) const DASHBOARD_JS: &str = include_str!("../web/dashboard.js");
/// `GET /dashboard.css`.
pub(crate) const DASHBOARD_CSS: &str = include_str!("../web/dashboard.css");
