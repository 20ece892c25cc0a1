//! Redis Streams, a store-and-forward stream server like a Stampede node: the ping-pong's exchange
//! as `XADD` / `XREAD BLOCK` through a `redis-server` this benchmark starts ([`RedisServer`]: a
//! free loopback port, no persistence — `--save '' --appendonly no`) and kills when done, also
//! on an error or a panic.
//!
//! This process `XADD`s the payload (one field) to `ping` (`MAXLEN ~ 64`: trimmed as it goes,
//! as Stampede reclaims) and blocks in `XREAD BLOCK` on `pong` after the last id it read; the
//! echo process ([`ECHO_ROLE`], its own connection) blocks in `XREAD BLOCK` on `ping`, touches
//! the payload and `XADD`s an answer of the same size to `pong`. Both use the `redis` crate's
//! synchronous connection with `TCP_NODELAY`, and its typed stream replies. One way = round
//! trip / 2.
//!
//! Without `redis-server` on `PATH` the row is skipped ([`RedisServer::start`] gives `None`);
//! `apt-get install -y redis-server` provides it ([`INSTALL`]).

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use redis::streams::{StreamMaxlen, StreamReadOptions, StreamReadReply};
use redis::{Commands, Connection, Value};

use crate::payload::{source, touch};
use crate::ping_pong;
use crate::process::{find_on_path, free_port, Role, Spawned, EXCHANGE_TIMEOUT, START_TIMEOUT};

use crate::BoxResult;

/// The role of the echo process: `<url> <ping stream> <pong stream> <payload_bytes> <round_trips>`.
pub const ECHO_ROLE: &str = "redis-echo";

/// The server program looked up on `PATH`.
pub const SERVER: &str = "redis-server";

/// How to get [`SERVER`] on Debian.
pub const INSTALL: &str = "apt-get install -y redis-server";

/// The field each stream entry carries its payload in.
const FIELD: &str = "d";

/// `MAXLEN ~` of every `XADD`: entries kept per stream, about.
const STREAM_ENTRIES_MAX: usize = 64;

/// A `redis-server` on a free loopback port, without persistence; killed when dropped.
pub struct RedisServer {
    /// `redis://127.0.0.1:<port>/`.
    pub url: String,
    process: Spawned,
}

impl RedisServer {
    /// Starts [`SERVER`] and waits (at most [`START_TIMEOUT`]) for it to answer `PING`; `None`
    /// when it is not on `PATH`.
    pub fn start() -> BoxResult<Option<RedisServer>> {
        let Some(binary) = find_on_path(SERVER) else { return Ok(None) };
        let port = free_port()?.to_string();
        let mut command = Command::new(binary);
        command.args(["--port", &port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]);
        command.args(["--daemonize", "no", "--loglevel", "warning"]);
        let mut server =
            RedisServer { url: format!("redis://127.0.0.1:{port}/"), process: Spawned::spawn(SERVER, command)? };
        let client = redis::Client::open(server.url.as_str())?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let pong = client
                .get_connection_with_timeout(Duration::from_secs(1))
                .and_then(|mut connection| redis::cmd("PING").query::<String>(&mut connection));
            match pong {
                Ok(_) => return Ok(Some(server)),
                Err(e) if !server.process.is_running() || Instant::now() >= deadline => {
                    return Err(format!("{SERVER} does not answer on {}: {e}", server.url).into());
                }
                Err(_) => thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// A new connection, its reads bounded a little beyond the longest `XREAD BLOCK`.
    fn connect(url: &str) -> BoxResult<Connection> {
        let connection = redis::Client::open(url)?.get_connection_with_timeout(START_TIMEOUT)?;
        connection.set_read_timeout(Some(EXCHANGE_TIMEOUT + Duration::from_secs(5)))?;
        Ok(connection)
    }
}

/// Round-trip times in ns of `round_trips` `XADD` → `XREAD BLOCK` → `XADD` back exchanges of
/// `payload_bytes` each way with an echo process, after `warmup` untimed ones, on streams named
/// after `payload_bytes` and `round` (fresh ones every time).
pub fn ping_pong(
    server: &RedisServer,
    payload_bytes: usize,
    round: usize,
    warmup: usize,
    round_trips: usize,
) -> BoxResult<Vec<u64>> {
    let (ping_key, pong_key) =
        (format!("bench:ping{payload_bytes}-{round}"), format!("bench:pong{payload_bytes}-{round}"));
    let total = warmup + round_trips;
    let args = [server.url.clone(), ping_key.clone(), pong_key.clone(), payload_bytes.to_string(), total.to_string()];
    let mut echo = Spawned::role(ECHO_ROLE, &args)?;
    let mut connection = RedisServer::connect(&server.url)?;
    echo.ready()?;
    let ping = source(payload_bytes, 0xa0);
    let mut last_id = "0".to_owned();
    let rtt_ns = ping_pong::timed(warmup, round_trips, |_| -> BoxResult<()> {
        add(&mut connection, &ping_key, &ping)?;
        last_id = read_after(&mut connection, &pong_key, &last_id)?;
        Ok(())
    })?;
    echo.finish()?;
    Ok(rtt_ns)
}

/// The echo process of [`ping_pong()`].
pub fn echo_role(role: &Role) -> BoxResult<()> {
    let url: String = role.arg(0, "url")?;
    let (ping_key, pong_key): (String, String) = (role.arg(1, "ping stream")?, role.arg(2, "pong stream")?);
    let (payload_bytes, total): (usize, usize) = (role.arg(3, "payload_bytes")?, role.arg(4, "round_trips")?);
    let mut connection = RedisServer::connect(&url)?;
    role.ready("")?;
    let answer = source(payload_bytes, 0xb0);
    let mut last_id = "0".to_owned();
    for _ in 0..total {
        last_id = read_after(&mut connection, &ping_key, &last_id)?;
        add(&mut connection, &pong_key, &answer)?;
    }
    Ok(())
}

/// `XADD <key> MAXLEN ~ 64 * d <payload>`.
fn add(connection: &mut Connection, key: &str, payload: &[u8]) -> BoxResult<()> {
    let _id: String =
        connection.xadd_maxlen(key, StreamMaxlen::Approx(STREAM_ENTRIES_MAX), "*", &[(FIELD, payload)])?;
    Ok(())
}

/// `XREAD BLOCK <ms> COUNT 1 STREAMS <key> <after_id>`: touches the entry's payload and returns
/// its id; an error when nothing comes within [`EXCHANGE_TIMEOUT`].
fn read_after(connection: &mut Connection, key: &str, after_id: &str) -> BoxResult<String> {
    let block_ms = usize::try_from(EXCHANGE_TIMEOUT.as_millis()).unwrap_or(usize::MAX);
    let options = StreamReadOptions::default().block(block_ms).count(1);
    let reply: Option<StreamReadReply> = connection.xread_options(&[key], &[after_id], &options)?;
    let entry = reply
        .and_then(|reply| reply.keys.into_iter().next())
        .and_then(|stream| stream.ids.into_iter().next())
        .ok_or_else(|| format!("XREAD BLOCK {key}: nothing within {EXCHANGE_TIMEOUT:?}"))?;
    match entry.map.get(FIELD) {
        Some(Value::BulkString(payload)) => touch(payload),
        other => return Err(format!("XREAD {key}: entry {} has no payload field: {other:?}", entry.id).into()),
    };
    Ok(entry.id)
}
