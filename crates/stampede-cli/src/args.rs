//! The command line's grammar (clap): every subcommand, its flags and their bounds; what each
//! does is `run` in the crate root and the module named for it.

use clap::{Parser, Subcommand};
use stampede_node::node::{LIVELINESS_TIMEOUT_DEFAULT, PAYLOAD_BYTES_MAX_DEFAULT};

use crate::{certs, dashboard, foxglove, hz, replay, tls};

#[derive(Parser)]
#[command(name = "stampede", version, about = "Stampede: time-indexed streams shared by processes and machines.")]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Runs a node serving a new runtime to clients until Ctrl-C or SIGTERM. Prints
    /// `listening on <endpoint>` for each endpoint once it is ready.
    Serve {
        /// An endpoint to listen on: tcp/127.0.0.1:7447, tls/127.0.0.1:7447 (with
        /// --tls-certificate and --tls-private-key), unixsock-stream/<path>. Repeatable.
        #[arg(long, required = true, value_name = "ENDPOINT")]
        listen: Vec<String>,
        /// An endpoint of another node to connect to. Repeatable.
        #[arg(long, value_name = "ENDPOINT")]
        connect: Vec<String>,
        /// The node's name (its key expressions are stampede/<name>/...).
        #[arg(long, default_value = "node")]
        name: String,
        /// Seconds after which a client that vanished without closing its link loses its session
        /// (its claims are released, the items it held go back).
        #[arg(long, value_name = "SECONDS", default_value_t = LIVELINESS_TIMEOUT_DEFAULT.as_secs_f64(), value_parser = seconds)]
        liveliness_timeout: f64,
        /// Largest payload of one put.
        #[arg(long, value_name = "BYTES", default_value_t = PAYLOAD_BYTES_MAX_DEFAULT)]
        max_payload_bytes: usize,
        /// Live payload bytes all clients' puts may hold together; at the limit a put waits for
        /// room, then fails Full naming the budget [default: half of the lower of the machine's
        /// memory and its cgroup's limit, printed at start].
        #[arg(long, value_name = "BYTES")]
        max_live_bytes: Option<u64>,
        /// Live payload bytes one client session's puts may hold [default: a quarter of
        /// --max-live-bytes].
        #[arg(long, value_name = "BYTES")]
        max_session_live_bytes: Option<u64>,
        /// Threads answering requests, 1 ..= 64 [default: half the processors, at least one:
        /// clients on this host need the rest; a node whose clients are elsewhere may use all].
        #[arg(long, value_name = "N")]
        workers: Option<usize>,
        /// Also serve a live web dashboard of the node on this port (0: any free port); prints
        /// `dashboard on <url>`.
        #[arg(long, value_name = "PORT")]
        dashboard: Option<u16>,
        #[command(flatten)]
        page: dashboard::Page,
        /// Also serve the node's channels live to Foxglove on this port (0: any free port; the
        /// --overlay and --allow-origin flags apply to it too); prints `foxglove on <url>`. Not
        /// with --access: Foxglove's viewers give no credentials (run `stampede foxglove
        /// --connect … --user …` instead).
        #[arg(long, value_name = "PORT")]
        foxglove: Option<u16>,
        #[command(flatten)]
        view: foxglove::View,
        /// Also take browser clients on this WebSocket endpoint, [host:]port (a bare port is on
        /// 127.0.0.1; 0: any free port; docs/BROWSER.md); pages of the --allow-origin origins
        /// may open it; with --tls-certificate it is wss://. Prints `websocket on <url>`.
        #[arg(long, value_name = "ADDRESS")]
        websocket: Option<String>,
        #[command(flatten)]
        tls: tls::ServeTls,
        /// A policy file (TOML): the users admitted, their password hashes and their read, write
        /// and create rights per name prefix (docs/SECURITY.md). Without it, anyone who reaches
        /// the node may do anything: allowed only on 127.0.0.1 and Unix sockets, or with
        /// --allow-anonymous.
        #[arg(long, value_name = "FILE")]
        access: Option<std::path::PathBuf>,
        /// Serve without an access policy on endpoints other machines reach (anyone may then do
        /// anything; the node warns).
        #[arg(long)]
        allow_anonymous: bool,
        /// Accepted for scripts written before every mesh shared one ts_min: it changes nothing
        /// (docs/PROTOCOL.md).
        #[arg(long, hide = true)]
        mesh_ts_min: bool,
        /// A test aid: shifts this node's clock by this many ms, as on a host whose clock is off
        /// (mesh time corrects it: docs/NODES.md, "Time across hosts").
        #[arg(long, hide = true, default_value_t = 0, allow_hyphen_values = true)]
        clock_skew_ms: i64,
    },
    /// Serves a live web dashboard of a node's runtime until Ctrl-C or SIGTERM: tasks,
    /// connections and channels with their counters and rates, and an image with overlays.
    /// Prints `dashboard on <url>`.
    Dashboard {
        /// The node's endpoint.
        #[arg(long, value_name = "ENDPOINT")]
        connect: String,
        /// The node to show, reached through the one at --connect (default: that one).
        #[arg(long)]
        node: Option<String>,
        /// Port to serve the page on (0: any free port).
        #[arg(long, default_value_t = 8080)]
        port: u16,
        #[command(flatten)]
        page: dashboard::Page,
        /// Seconds to keep trying to reach the node.
        #[arg(long, value_name = "SECONDS", default_value_t = 5.0, value_parser = seconds)]
        timeout: f64,
        /// Serve the page on an address other machines reach (--dashboard-host) without a login:
        /// anyone who reaches it sees every task and channel.
        #[arg(long)]
        allow_anonymous: bool,
        #[command(flatten)]
        tls: tls::ConnectTls,
    },
    /// Serves a node's channels live to Foxglove (or Lichtblick) on the Foxglove WebSocket
    /// protocol until Ctrl-C or SIGTERM: npy images, boxes, text and JSON drawn as they are put.
    /// Prints `foxglove on <url>`.
    Foxglove {
        /// Name prefixes to serve ("kiosk" serves kiosk/frames, kiosk/decisions, ...); all if none.
        names: Vec<String>,
        /// The node's endpoint.
        #[arg(long, value_name = "ENDPOINT")]
        connect: String,
        /// The node to show, reached through the one at --connect (default: that one).
        #[arg(long)]
        node: Option<String>,
        /// Port to serve on (0: any free port).
        #[arg(long, default_value_t = stampede_dashboard::foxglove::PORT_DEFAULT)]
        port: u16,
        #[command(flatten)]
        view: foxglove::View,
        /// A channel of JSON boxes ({"boxes": [{"x", "y", "w", "h", "label", "color"}]}) shown as
        /// image annotations. Repeatable.
        #[arg(long = "overlay", value_name = "CHANNEL")]
        overlays: Vec<String>,
        /// A web origin besides Foxglove's web app (https://app.foxglove.dev) whose pages may
        /// connect; others are refused. Repeatable.
        #[arg(long = "allow-origin", value_name = "ORIGIN")]
        allowed_origins: Vec<String>,
        /// Listen on an address other machines reach (--foxglove-host): Foxglove's viewers give
        /// no credentials, so anyone who reaches it sees what this client may read.
        #[arg(long)]
        allow_anonymous: bool,
        /// Seconds to keep trying to reach the node.
        #[arg(long, value_name = "SECONDS", default_value_t = 5.0, value_parser = seconds)]
        timeout: f64,
        #[command(flatten)]
        tls: tls::ConnectTls,
    },
    /// Lists the names of the channels and queues on a node, one per line; with --ts-min, what
    /// holds the node's ts_min where it is (tasks, connections, queues, other nodes).
    Ls {
        /// Hierarchical prefix: "camera/" lists the names under camera/.
        #[arg(default_value = "")]
        prefix: String,
        /// Also say what holds ts_min: one line per claim at it, after the names.
        #[arg(long)]
        ts_min: bool,
        /// The node's endpoint.
        #[arg(long, value_name = "ENDPOINT")]
        connect: String,
        /// Seconds to keep trying to reach the node.
        #[arg(long, value_name = "SECONDS", default_value_t = 5.0, value_parser = seconds)]
        timeout: f64,
        #[command(flatten)]
        tls: tls::ConnectTls,
    },
    /// What a channel or queue is and who uses it: kind, bounds, codec, live items and bytes,
    /// puts, gets, reclaimed, its claim on ts_min, its producers and consumers.
    Info {
        /// The channel's or queue's name.
        name: String,
        /// The endpoint of a node.
        #[arg(long, value_name = "ENDPOINT")]
        connect: String,
        /// The node it is on, reached through the one at --connect (default: that one).
        #[arg(long)]
        node: Option<String>,
        /// Seconds to keep trying to reach the node.
        #[arg(long, value_name = "SECONDS", default_value_t = 5.0, value_parser = seconds)]
        timeout: f64,
        #[command(flatten)]
        tls: tls::ConnectTls,
    },
    /// How a channel is doing, a line a second: rate with the min, max and std of the intervals
    /// between puts, bandwidth and item sizes over the last --window puts (read from the node's
    /// put log: nothing attaches, no payload moves).
    Hz {
        /// The channel's name.
        name: String,
        /// The endpoint of a node.
        #[arg(long, value_name = "ENDPOINT")]
        connect: String,
        /// The node it is on, reached through the one at --connect (default: that one).
        #[arg(long)]
        node: Option<String>,
        /// Puts each line is computed over (the newest; at most the log's 1024).
        #[arg(long, default_value_t = hz::WINDOW_DEFAULT as u64, value_parser = clap::value_parser!(u64).range(2..=1024))]
        window: u64,
        /// Print this many lines, then exit (default: until Ctrl-C).
        #[arg(long)]
        count: Option<u64>,
        /// Seconds to keep trying to reach the node.
        #[arg(long, value_name = "SECONDS", default_value_t = 5.0, value_parser = seconds)]
        timeout: f64,
        #[command(flatten)]
        tls: tls::ConnectTls,
    },
    /// Follows a channel: one line per item (timestamp, size, codec; text, or dtype and shape).
    Tail {
        /// The channel's name.
        name: String,
        /// The endpoint of a node.
        #[arg(long, value_name = "ENDPOINT")]
        connect: String,
        /// The node the channel is on, reached through the one at --connect (default: that one).
        #[arg(long)]
        node: Option<String>,
        /// Stop after this many items (default: follow until Ctrl-C).
        #[arg(long)]
        count: Option<u64>,
        /// Seconds to keep trying to reach the node.
        #[arg(long, value_name = "SECONDS", default_value_t = 5.0, value_parser = seconds)]
        timeout: f64,
        #[command(flatten)]
        tls: tls::ConnectTls,
    },
    /// Records channels of a node to an MCAP file until Ctrl-C or --seconds; channels created
    /// later under the names are followed too. Nothing is dropped: what the recorder has not
    /// written stays in its channel.
    Record {
        /// Channel names or hierarchical prefixes ("camera/"; "" for every channel).
        #[arg(required = true)]
        names: Vec<String>,
        /// The file to write (replaced if it exists).
        #[arg(short, long, value_name = "FILE")]
        output: std::path::PathBuf,
        /// The node's endpoint.
        #[arg(long, value_name = "ENDPOINT")]
        connect: String,
        /// The node the channels are on, reached through the one at --connect.
        #[arg(long)]
        node: Option<String>,
        /// Stop after this many seconds.
        #[arg(long, value_name = "SECONDS", value_parser = seconds)]
        seconds: Option<f64>,
        /// Chunk compression: none, lz4 or zstd.
        #[arg(long, default_value = "lz4", value_parser = compression)]
        compression: stampede_record::Compression,
        /// A chunk is written out at least this often: what a crash of the recorder can lose.
        #[arg(long, value_name = "SECONDS", default_value_t = 1.0, value_parser = seconds)]
        flush_interval: f64,
        /// Also write what Foxglove draws, beside the raw items: npy frames as images, JSON with
        /// boxes as image annotations, text as log lines (on <name>/foxglove; replay skips them).
        #[arg(long)]
        foxglove_schemas: bool,
        /// Write a ROS 2 bag instead (rosbag2's MCAP storage, one file): images as
        /// sensor_msgs/msg/Image, JSON and text as std_msgs/msg/String, ros2:<type> items as
        /// themselves; other items are not written (counted).
        #[arg(long, conflicts_with = "foxglove_schemas")]
        ros2: bool,
        /// With --foxglove-schemas or --ros2: seconds per timestamp on the timeline (0.0333 for
        /// frame numbers at 30 fps, the default) or ns.
        #[arg(long, value_name = "SECONDS|ns", value_parser = stampede_dashboard::foxglove::Tick::parse)]
        tick: Option<stampede_dashboard::foxglove::Tick>,
        /// Seconds to keep trying to reach the node.
        #[arg(long, value_name = "SECONDS", default_value_t = 5.0, value_parser = seconds)]
        timeout: f64,
        #[command(flatten)]
        tls: tls::ConnectTls,
    },
    /// Puts a recording's items back into channels of a node (created as recorded when missing),
    /// paced at the recorded timing; also a ROS 2 bag (rosbag2's MCAP storage: a file or its
    /// directory), each topic into a channel.
    Replay {
        /// The recording.
        input: std::path::PathBuf,
        /// The node's endpoint.
        #[arg(long, value_name = "ENDPOINT")]
        connect: String,
        /// The node to replay into, reached through the one at --connect.
        #[arg(long)]
        node: Option<String>,
        /// Speed: 1 is the recorded timing, 2 twice as fast, max as fast as the channels take.
        #[arg(long, default_value = "1", value_parser = replay::rate)]
        rate: replay::Rate,
        /// Replay again and again (each pass's timestamps follow the previous pass's) until Ctrl-C.
        #[arg(long = "loop")]
        repeat: bool,
        /// Replay channel FROM (and the names under it) into TO. Repeatable.
        #[arg(long, value_name = "FROM=TO", value_parser = replay::remap)]
        remap: Vec<(String, String)>,
        /// Added to every timestamp: to replay above the node's ts_min.
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        offset: i64,
        /// A ROS 2 bag's timestamps: each message's header stamp (the log time for a message
        /// without a header) or its log time.
        #[arg(long, value_name = "header|log", default_value = "header", value_parser = replay::time_source)]
        time: stampede_record::ros2::TimeSource,
        /// A ROS 2 bag's times as timestamps: seconds per timestamp (0.0333 for frame numbers at
        /// 30 fps), or ns (the default: nanoseconds as they are).
        #[arg(long, value_name = "SECONDS|ns", default_value = "ns", value_parser = stampede_dashboard::foxglove::Tick::parse)]
        tick: stampede_dashboard::foxglove::Tick,
        /// Seconds to keep trying to reach the node.
        #[arg(long, value_name = "SECONDS", default_value_t = 5.0, value_parser = seconds)]
        timeout: f64,
        #[command(flatten)]
        tls: tls::ConnectTls,
    },
    /// Reads a password from standard input (one line) and prints its Argon2id hash, for the
    /// `password` of a user in an --access policy file.
    HashPassword,
    /// Makes a certificate authority (once: ca.pem, ca.key, reused after) and certificates for
    /// the nodes and clients of a TLS mesh, as PEM files in --out (docs/SECURITY.md). Never
    /// overwrites a file.
    Certs {
        /// The directory to write into (created if need be).
        #[arg(long, default_value = "certs")]
        out: std::path::PathBuf,
        /// A node's certificate: its name (the common name, for --mesh-node-cn) and the hosts
        /// clients reach it at, as IP addresses or DNS names: a=127.0.0.1,localhost. Repeatable.
        #[arg(long = "node", value_name = "NAME=HOST[,HOST...]", value_parser = certs::node_spec)]
        nodes: Vec<certs::NodeSpec>,
        /// A client's certificate, its user's name as the common name. Repeatable.
        #[arg(long = "client", value_name = "NAME", value_parser = certs::file_name)]
        clients: Vec<String>,
        /// Days the certificates are valid.
        #[arg(long, default_value_t = 365)]
        days: u32,
    },
    /// The event logs of a traced run (STAMPEDE_TRACE=<dir>): a Perfetto trace, or where each
    /// thread's time went.
    Trace {
        #[command(subcommand)]
        action: TraceAction,
    },
}

#[derive(Subcommand)]
pub(crate) enum TraceAction {
    /// Writes the merged logs as a Chrome trace JSON file (open it in ui.perfetto.dev).
    Export {
        /// The directory the run logged into.
        dir: std::path::PathBuf,
        /// The JSON file to write.
        #[arg(short, long, default_value = "trace.json")]
        output: std::path::PathBuf,
    },
    /// Prints each thread's wall time split into application, blocking, runtime and messaging,
    /// and draws it as a chart (PNG, with matplotlib: $STAMPEDE_PYTHON, default python3).
    Report {
        /// The directory the run logged into.
        dir: std::path::PathBuf,
        /// The chart's PNG file [default: <dir>/breakdown.png].
        #[arg(long)]
        chart: Option<std::path::PathBuf>,
        /// Prints the table only.
        #[arg(long, conflicts_with = "chart")]
        no_chart: bool,
    },
}

/// `none`, `lz4` or `zstd`.
pub(crate) fn compression(text: &str) -> Result<stampede_record::Compression, String> {
    stampede_record::Compression::from_name(text).ok_or_else(|| format!("{text:?} is not none, lz4 or zstd"))
}

/// Shortest duration a flag in seconds takes: below it, scheduling noise alone is the whole wait.
const SECONDS_MIN: f64 = 0.001;
/// Longest duration a flag in seconds takes (30 days): beyond it a wait is a mistake, not a plan.
const SECONDS_MAX: f64 = 30.0 * 24.0 * 3600.0;

/// A number of seconds in `SECONDS_MIN ..= SECONDS_MAX`.
pub(crate) fn seconds(text: &str) -> Result<f64, String> {
    let s: f64 = text.parse().map_err(|e| format!("{text:?} is not a number of seconds: {e}"))?;
    if (SECONDS_MIN..=SECONDS_MAX).contains(&s) {
        Ok(s)
    } else {
        Err(format!("{text} seconds is outside {SECONDS_MIN} ..= {SECONDS_MAX} (SECONDS_MIN, SECONDS_MAX: 30 days)"))
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// The command line is well formed (clap's own checks: unique names and groups, sound
    /// `requires`), which clap otherwise only checks when a command is parsed.
    #[test]
    fn command_line_is_consistent() {
        super::Cli::command().debug_assert();
    }

    /// Every flag in seconds is bounded, and the refusal names the bounds.
    #[test]
    fn durations_are_bounded() {
        assert_eq!(super::seconds("2.5"), Ok(2.5));
        for bad in ["0", "-1", "0.0001", "1e12", "inf", "NaN", "2592001"] {
            let refused = super::seconds(bad).unwrap_err();
            assert!(refused.contains("SECONDS_MIN") || refused.contains("not a number"), "{bad}: {refused}");
        }
        assert!(super::seconds(&super::SECONDS_MAX.to_string()).is_ok());
    }
}
