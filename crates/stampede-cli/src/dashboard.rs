//! `stampede dashboard --connect <endpoint>`: a live web dashboard of a node's runtime (see
//! `docs/DASHBOARD.md`), served until Ctrl-C or SIGTERM; and the dashboard options `stampede
//! serve --dashboard <port>` shares.
//!
//! Prints exactly `dashboard on <url>`, flushed, once the page is served.

use std::io::Write;
use std::net::IpAddr;
use std::time::Duration;

use stampede::{connect_with, ConnectOptions, Runtime};
use stampede_dashboard::{Dashboard, DashboardOptions, Login};

/// What the page shows and where, as given on the command line.
#[derive(clap::Args, Clone, Debug)]
pub struct Page {
    /// Address the dashboard listens on (127.0.0.1: this machine only).
    #[arg(long = "dashboard-host", value_name = "ADDRESS", default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// A channel of npy uint8 frames, (H, W), (H, W, 3) or (H, W, 4), to show.
    #[arg(long, value_name = "CHANNEL")]
    pub image: Option<String>,
    /// A channel of JSON boxes ({"boxes": [{"x", "y", "w", "h", "label", "color"}]}) drawn over
    /// the image. Repeatable.
    #[arg(long = "overlay", value_name = "CHANNEL")]
    pub overlays: Vec<String>,
    /// Seconds between page updates.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.2, value_parser = crate::args::seconds)]
    pub refresh: f64,
    /// A web origin (https://viewer.example) besides the dashboard's own page whose pages may
    /// open its WebSocket (and, with `serve`, the Foxglove bridge's and the node's --websocket);
    /// others are refused. Repeatable.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allowed_origins: Vec<String>,
}

impl Page {
    /// The dashboard's options on `port`; `allow_anonymous`: serve it beyond loopback without a
    /// login (`--allow-anonymous`).
    pub fn options(&self, port: u16, allow_anonymous: bool) -> DashboardOptions {
        DashboardOptions {
            host: self.host,
            port,
            image: self.image.clone(),
            overlays: self.overlays.clone(),
            refresh: Duration::from_secs_f64(self.refresh),
            allowed_origins: self.allowed_origins.clone(),
            allow_anonymous,
        }
    }
}

/// What `dashboard` was asked for.
pub struct Options {
    pub endpoint: String,
    pub port: u16,
    pub page: Page,
    /// Serve the page beyond loopback without a login (`--allow-anonymous`).
    pub allow_anonymous: bool,
    /// The timeout, the node to show (reached through `endpoint`) and TLS files.
    pub connect: ConnectOptions,
}

/// Serves the dashboard of the node at `endpoint` until a signal.
pub fn run(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    let runtime = connect_with(&options.endpoint, &options.connect)?;
    // It shows what the user may read: whoever views it logs in as that user.
    let login = options.connect.user.as_ref().map(|c| stampede_dashboard::login_as(&c.user, &c.password));
    let served = serve(&runtime, options.page.options(options.port, options.allow_anonymous), login);
    let dashboard = match served {
        Ok(dashboard) => dashboard,
        Err(e) => {
            runtime.close();
            return Err(e);
        }
    };
    let waited = crate::serve::wait_for_signal();
    dashboard.close();
    runtime.close();
    waited?;
    Ok(())
}

/// Starts a dashboard of `runtime`, behind `login` if any, and prints `dashboard on <url>`.
pub fn serve(
    runtime: &Runtime,
    options: DashboardOptions,
    login: Option<Login>,
) -> Result<Dashboard, Box<dyn std::error::Error>> {
    let dashboard = match login {
        Some(login) => Dashboard::serve_with_login(runtime.clone(), options, login)?,
        None => Dashboard::serve(runtime.clone(), options)?,
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "dashboard on {}", dashboard.url())?;
    out.flush()?;
    Ok(dashboard)
}
