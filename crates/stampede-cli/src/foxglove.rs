//! `stampede foxglove --connect <endpoint> [names…]`: a node's channels live in Foxglove (see
//! `docs/FOXGLOVE.md`), served until Ctrl-C or SIGTERM; and the bridge options `stampede serve
//! --foxglove <port>` shares.
//!
//! Prints exactly `foxglove on <url>`, flushed, once the bridge listens.

use std::io::Write;
use std::net::IpAddr;

use stampede::{connect_with, ConnectOptions, Runtime};
use stampede_dashboard::foxglove::{Foxglove, FoxgloveOptions, Tick, FOXGLOVE_APP_ORIGIN};

/// How the bridge places timestamps and where it listens, as given on the command line (the
/// flags `serve` takes beside `--foxglove`).
#[derive(clap::Args, Clone, Debug)]
pub struct View {
    /// Address the Foxglove bridge listens on (127.0.0.1: this machine only).
    #[arg(long = "foxglove-host", value_name = "ADDRESS", default_value = "127.0.0.1")]
    pub foxglove_host: IpAddr,
    /// How timestamps go on Foxglove's timeline: seconds per timestamp (0.0333 for frame
    /// numbers at 30 fps, the default) or `ns` (timestamps are nanoseconds); `NAME=…` for one
    /// channel. Repeatable.
    #[arg(long = "tick", value_name = "[NAME=]SECONDS|ns", value_parser = tick)]
    pub ticks: Vec<(Option<String>, Tick)>,
}

/// `[NAME=]SECONDS|ns`.
fn tick(text: &str) -> Result<(Option<String>, Tick), String> {
    match text.rsplit_once('=') {
        Some((name, tick)) => Ok((Some(name.to_owned()), Tick::parse(tick)?)),
        None => Ok((None, Tick::parse(text)?)),
    }
}

impl View {
    /// The bridge's options on `port`, serving `names` (all if empty), with `overlays` drawn as
    /// annotations and pages of `origins` (and Foxglove's web app) allowed.
    pub fn options(
        &self,
        port: u16,
        names: Vec<String>,
        overlays: Vec<String>,
        origins: &[String],
        allow_anonymous: bool,
    ) -> FoxgloveOptions {
        let tick = self.ticks.iter().rev().find(|(name, _)| name.is_none()).map_or(Tick::DEFAULT, |&(_, t)| t);
        FoxgloveOptions {
            host: self.foxglove_host,
            port,
            names,
            overlays,
            tick,
            ticks: self.ticks.iter().filter_map(|(name, t)| Some((name.clone()?, *t))).collect(),
            allowed_origins: [FOXGLOVE_APP_ORIGIN.to_owned()].into_iter().chain(origins.iter().cloned()).collect(),
            allow_anonymous,
        }
    }
}

/// What `foxglove` was asked for.
pub struct Options {
    pub endpoint: String,
    pub bridge: FoxgloveOptions,
    /// The timeout, the node to show (reached through `endpoint`), the user and TLS files.
    pub connect: ConnectOptions,
}

/// Serves the node at `endpoint` to Foxglove until a signal.
pub fn run(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    let runtime = connect_with(&options.endpoint, &options.connect)?;
    let bridge = match serve(&runtime, options.bridge) {
        Ok(bridge) => bridge,
        Err(e) => {
            runtime.close();
            return Err(e);
        }
    };
    let waited = crate::serve::wait_for_signal();
    bridge.close();
    runtime.close();
    waited?;
    Ok(())
}

/// Starts a bridge of `runtime` and prints `foxglove on <url>`.
pub fn serve(runtime: &Runtime, options: FoxgloveOptions) -> Result<Foxglove, Box<dyn std::error::Error>> {
    let bridge = Foxglove::serve(runtime.clone(), options)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "foxglove on {}", bridge.url())?;
    out.flush()?;
    Ok(bridge)
}
