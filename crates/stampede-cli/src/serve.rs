//! `stampede serve`: a node serving a new runtime until Ctrl-C or SIGTERM.
//!
//! Prints exactly `listening on <endpoint>` per endpoint, flushed, once the node is on the fabric;
//! on the signal it closes the node (client sessions end, their claims are released) and the
//! runtime, and exits 0. With `--dashboard <port>` it also serves a dashboard of its runtime and
//! prints `dashboard on <url>` after the endpoints. With `--access` too, the dashboard asks for a
//! login (HTTP Basic): a user of the policy with its password and the `read` right on `""` — what
//! the node's graph needs from a client; anyone else gets `401`. With `--foxglove <port>` it
//! serves its channels to Foxglove and prints `foxglove on <url>` (refused with `--access`:
//! Foxglove's viewers give no credentials).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use stampede::Runtime;
use stampede_dashboard::Login;
use stampede_node::access::Right;
use stampede_node::{AccessPolicy, TlsOptions};
use stampede_node::{Node, NodeOptions};

/// What `serve` was asked for.
pub struct Options {
    pub listen: Vec<String>,
    pub connect: Vec<String>,
    pub name: String,
    pub liveliness_timeout: Duration,
    pub payload_bytes_max: usize,
    /// The byte budgets ([`NodeOptions::max_live_bytes`], [`NodeOptions::max_session_live_bytes`]).
    pub max_live_bytes: Option<u64>,
    pub max_session_live_bytes: Option<u64>,
    /// [`NodeOptions::workers`].
    pub workers: Option<usize>,
    /// Serve a dashboard of the node's runtime on this port (0: any free port), and what it shows.
    pub dashboard: Option<(u16, crate::dashboard::Page)>,
    /// Serve the node's channels to Foxglove, with these options.
    pub foxglove: Option<stampede_dashboard::foxglove::FoxgloveOptions>,
    /// Certificates for the tls/ endpoints.
    pub tls: Option<TlsOptions>,
    /// The access policy file, if any.
    pub access: Option<std::path::PathBuf>,
    /// Serve without a policy beyond loopback ([`NodeOptions::allow_anonymous`]).
    pub allow_anonymous: bool,
    /// [`NodeOptions::clock_skew_ns`].
    pub clock_skew_ns: i64,
    /// The WebSocket endpoint for browser clients ([`NodeOptions::websocket`]).
    pub websocket: Option<String>,
    /// Pages that may open it ([`NodeOptions::allowed_origins`]).
    pub allowed_origins: Vec<String>,
}

/// Serves until a signal; the node's or the signal handler's error otherwise.
pub fn run(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    if options.foxglove.is_some() && options.access.is_some() {
        return Err("--foxglove with --access: Foxglove's viewers give no credentials, so the bridge would show \
                    every channel to anyone on this machine. Serve the node alone and run `stampede foxglove \
                    --connect <endpoint> --user <user>` where you view it: it shows what that user may read"
            .into());
    }
    let access = options.access.as_deref().map(AccessPolicy::load).transpose()?;
    let login = access.clone().map(|policy| dashboard_login(policy, options.name.clone()));
    let runtime = Runtime::new();
    // A dashboard or a Foxglove bridge reads through tasks of the node's own runtime: then the
    // node keeps its door; otherwise its clients' sessions are all that need one.
    let serve_only = options.dashboard.is_none() && options.foxglove.is_none();
    let node = Node::serve(
        runtime.engine()?,
        NodeOptions {
            name: options.name,
            listen: options.listen,
            connect: options.connect,
            liveliness_timeout: options.liveliness_timeout,
            payload_bytes_max: options.payload_bytes_max,
            max_live_bytes: options.max_live_bytes,
            max_session_live_bytes: options.max_session_live_bytes,
            workers: options.workers,
            tls: options.tls,
            serve_only,
            access,
            allow_anonymous: options.allow_anonymous,
            clock_skew_ns: options.clock_skew_ns,
            websocket: options.websocket,
            allowed_origins: options.allowed_origins,
            ..NodeOptions::default()
        },
    )?;
    {
        let mut out = std::io::stdout().lock();
        for endpoint in node.endpoints() {
            writeln!(out, "listening on {endpoint}")?;
        }
        if let Some(url) = node.websocket_url() {
            writeln!(out, "websocket on {url}")?;
        }
        out.flush()?;
    }
    let dashboard = match options.dashboard {
        Some((port, page)) => {
            match crate::dashboard::serve(&runtime, page.options(port, options.allow_anonymous), login) {
                Ok(dashboard) => Some(dashboard),
                Err(e) => {
                    node.close();
                    runtime.close();
                    return Err(e);
                }
            }
        }
        None => None,
    };
    let foxglove = match options.foxglove {
        Some(bridge) => match crate::foxglove::serve(&runtime, bridge) {
            Ok(bridge) => Some(bridge),
            Err(e) => {
                if let Some(dashboard) = dashboard {
                    dashboard.close();
                }
                node.close();
                runtime.close();
                return Err(e);
            }
        },
        None => None,
    };
    let waited = wait_for_signal();
    if let Some(bridge) = foxglove {
        bridge.close();
    }
    if let Some(dashboard) = dashboard {
        dashboard.close();
    }
    node.close();
    runtime.close();
    waited?;
    Ok(())
}

/// The dashboard's login on a node with `policy`: a user and its password, with the `read` right
/// on `""` (the graph, as a client's `graph()` needs).
fn dashboard_login(policy: AccessPolicy, node: String) -> Login {
    Arc::new(move |user: &str, password: &str| {
        policy.authenticate(&node, Some(user), Some(password)).is_ok_and(|rights| rights.allows(Right::Read, ""))
    })
}

/// Blocks until Ctrl-C (SIGINT) or SIGTERM.
pub fn wait_for_signal() -> std::io::Result<()> {
    let signals = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    signals.block_on(async {
        #[cfg(unix)]
        {
            let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                interrupted = tokio::signal::ctrl_c() => interrupted,
                _ = terminate.recv() => Ok(()),
            }
        }
        #[cfg(not(unix))]
        tokio::signal::ctrl_c().await
    })
}
