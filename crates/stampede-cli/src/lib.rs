//! `stampede`: the command line of Stampede (docs/NODES.md), thin over the library.
//!
//! - `stampede serve --listen <endpoint> ...` — runs a node (see [`serve`]).
//! - `stampede ls [prefix] --connect <endpoint>` — lists the names on a node (see [`ls`]).
//! - `stampede tail <name> --connect <endpoint>` — follows a channel, one line per item (see
//!   [`tail`]); `stampede hz <name>` — its rate, jitter and bandwidth (see [`hz`]); `stampede
//!   info <name>` — what it is and who uses it (see [`info`]).
//! - `stampede record <names>... -o run.mcap --connect <endpoint>` — records channels to an MCAP
//!   file (see [`record`]); `stampede replay run.mcap --connect <endpoint>` puts them back (see
//!   [`replay`]).
//! - `stampede dashboard --connect <endpoint> [--port <port>]` — serves a live web dashboard of a
//!   node's runtime (see [`dashboard`]); `stampede serve --dashboard <port>` serves one of its own.
//! - `stampede foxglove --connect <endpoint> [names…]` — a node's channels live in Foxglove (see
//!   [`foxglove`]); `stampede serve --foxglove <port>` serves its own.
//!
//! - `stampede certs --node a=127.0.0.1 --client alice` — a CA and the certificates of a TLS mesh
//!   (see [`certs`]); `stampede hash-password` — a password's hash for an access policy.
//! - `stampede trace export <dir> -o trace.json`, `stampede trace report <dir>` — the event logs
//!   of a traced run (`STAMPEDE_TRACE=<dir>`) as a Perfetto trace or a table (see [`trace`]).
//!
//! Each takes the TLS flags of [`tls`] for `tls/<host>:<port>` and `quic/<host>:<port>` endpoints (`docs/SECURITY.md`).
//!
//! Errors are printed as `stampede: <message>` on stderr with exit status 1; usage errors exit 2.
//!
//! The command is this library's [`run`]: the `stampede` binary (`src/main.rs`) calls it, and so
//! does the Python package's `stampede` console script (the wheel carries the command without a
//! separate binary). The grammar — every subcommand, flag and bound — is `args`.

mod args;
mod certs;
mod dashboard;
mod foxglove;
mod hz;
mod info;
mod ls;
mod record;
mod replay;
mod serve;
mod tail;
mod tls;
mod trace;

use std::ffi::OsString;
use std::time::Duration;

use clap::Parser;

use args::{Cli, Command, TraceAction};

/// Runs the command line `args` (the program's name first, as `std::env::args_os` gives it) to its
/// end; its exit status (0, or 1 after the error was printed). A usage error prints clap's message
/// and returns 2 (`--help` and `--version` print and return 0): it never exits the process itself,
/// which may be a Python interpreter running the package's console script.
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(usage) => {
            let _ = usage.print();
            return u8::try_from(usage.exit_code()).unwrap_or(2);
        }
    };
    let done = match cli.command {
        Command::Serve {
            listen,
            connect,
            name,
            liveliness_timeout,
            max_payload_bytes,
            max_live_bytes,
            max_session_live_bytes,
            workers,
            dashboard,
            page,
            foxglove,
            view,
            websocket,
            tls,
            access,
            allow_anonymous,
            mesh_ts_min: _,
            clock_skew_ms,
        } => serve::run(serve::Options {
            clock_skew_ns: clock_skew_ms.saturating_mul(1_000_000),
            foxglove: foxglove.map(|port| {
                view.options(port, Vec::new(), page.overlays.clone(), &page.allowed_origins, allow_anonymous)
            }),
            access,
            allow_anonymous,
            websocket,
            allowed_origins: page.allowed_origins.clone(),
            listen,
            connect,
            name,
            liveliness_timeout: Duration::from_secs_f64(liveliness_timeout),
            payload_bytes_max: max_payload_bytes,
            max_live_bytes,
            max_session_live_bytes,
            workers,
            dashboard: dashboard.map(|port| (port, page)),
            tls: tls.options(),
        }),
        Command::Dashboard { connect, node, port, page, timeout, allow_anonymous, tls } => {
            dashboard::run(dashboard::Options {
                endpoint: connect,
                port,
                page,
                allow_anonymous,
                connect: tls.options(Duration::from_secs_f64(timeout), node),
            })
        }
        Command::Foxglove {
            names,
            connect,
            node,
            port,
            view,
            overlays,
            allowed_origins,
            allow_anonymous,
            timeout,
            tls,
        } => foxglove::run(foxglove::Options {
            endpoint: connect,
            bridge: view.options(port, names, overlays, &allowed_origins, allow_anonymous),
            connect: tls.options(Duration::from_secs_f64(timeout), node),
        }),
        Command::Ls { prefix, ts_min, connect, timeout, tls } => {
            ls::run(&prefix, ts_min, &connect, &tls.options(Duration::from_secs_f64(timeout), None))
        }
        Command::Hz { name, connect, node, window, count, timeout, tls } => hz::run(hz::Options {
            name,
            endpoint: connect,
            window: window as usize,
            count,
            connect: tls.options(Duration::from_secs_f64(timeout), node),
        }),
        Command::Info { name, connect, node, timeout, tls } => {
            info::run(&name, &connect, &tls.options(Duration::from_secs_f64(timeout), node))
        }
        Command::Tail { name, connect, node, count, timeout, tls } => tail::run(tail::Options {
            name,
            endpoint: connect,
            count,
            connect: tls.options(Duration::from_secs_f64(timeout), node),
        }),
        Command::Record {
            names,
            output,
            connect,
            node,
            seconds,
            compression,
            flush_interval,
            foxglove_schemas,
            ros2,
            tick,
            timeout,
            tls,
        } => {
            let tick = tick.unwrap_or(stampede_dashboard::foxglove::Tick::DEFAULT);
            record::run(record::Options {
                names,
                output,
                endpoint: connect,
                seconds,
                recorder: stampede_record::RecorderOptions {
                    compression,
                    flush_interval: Duration::from_secs_f64(flush_interval),
                    foxglove: foxglove_schemas.then_some(tick),
                    ros2: ros2.then_some(tick),
                    ..stampede_record::RecorderOptions::default()
                },
                connect: tls.options(Duration::from_secs_f64(timeout), node),
            })
        }
        Command::Replay { input, connect, node, rate, repeat, remap, offset, time, tick, timeout, tls } => {
            replay::run(replay::Options {
                input,
                endpoint: connect,
                replay: stampede_record::ReplayOptions {
                    rate: rate.0,
                    passes: if repeat { None } else { Some(1) },
                    remap,
                    offset,
                    ros2: stampede_record::ros2::Ros2Time { source: time, tick },
                },
                connect: tls.options(Duration::from_secs_f64(timeout), node),
            })
        }
        Command::HashPassword => hash_password(),
        Command::Certs { out, nodes, clients, days } => certs::run(&out, &nodes, &clients, days),
        Command::Trace { action: TraceAction::Export { dir, output } } => trace::export(&dir, &output),
        Command::Trace { action: TraceAction::Report { dir, chart, no_chart } } => {
            let chart = (!no_chart).then(|| chart.unwrap_or_else(|| dir.join("breakdown.png")));
            trace::report(&dir, chart.as_deref())
        }
    };
    match done {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("stampede: {e}");
            1
        }
    }
}

/// `stampede hash-password`: a line of standard input (without its line ending) to a PHC string.
fn hash_password() -> Result<(), Box<dyn std::error::Error>> {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let password = line.trim_end_matches(['\n', '\r']);
    if password.is_empty() {
        return Err("no password on standard input (e.g. `printf %s \"$PASSWORD\" | stampede hash-password`)".into());
    }
    println!("{}", stampede_node::access::hash_password(password)?);
    Ok(())
}
