//! Remote hand-off latency (issue 9, first slice): the `handoff` ping-pong through a
//! `stampede serve` process on loopback TCP, beside the embedded hand-off and a raw TCP
//! ping-pong, in one run. Not optimised yet: this measures where the first slice stands.
//!
//! - remote: two client sessions (two zenoh links) of one `stampede serve` node. A (virtual time
//!   `i`) puts `ts=i` into `ping`, advances its virtual time, blocks on an exact get of `i` from
//!   `pong`, consumes it; B (virtual time `INFINITY`) blocks on `NEWEST_UNSEEN` of `ping`, puts
//!   its answer at the same ts into `pong`, consumes. Every call is one request to the node (A:
//!   put, set_virtual_time, get, consume; B: get, put, consume). One way = round trip / 2.
//! - embedded: the same loop on an in-process runtime ([`ping_pong::embedded`], `handoff`'s case).
//! - raw TCP: a client writes the payload on a `TCP_NODELAY` socket, an echo thread reads it whole
//!   and writes it back. One way = round trip / 2.
//! - remote call: one `names` request (no payload, no wait): the fabric's fixed cost per call,
//!   beside a bare zenoh query (a router session with a queryable answering 8 bytes at once, and
//!   a client session querying it over loopback TCP, both in this process) and a raw TCP round trip.
//!
//! Needs the `stampede` binary beside this one: `cargo build --release -p stampede-cli` first.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

use stampede::{connect, Runtime};
use stampede::{Limits, INFINITY, NEWEST_UNSEEN};
use stampede_bench::cli::Options;
use stampede_bench::payload::{case_name, source, touch, IMAGE_BYTES, SMALL_BYTES};
use stampede_bench::ping_pong;
use stampede_bench::pipe::ts_of;
use stampede_bench::report::Line;
use stampede_bench::stats::Summary;

type BoxResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// How long to wait for the node to start and for a client to reach it.
const START_TIMEOUT: Duration = Duration::from_secs(20);

fn main() -> BoxResult<()> {
    let options = Options::from_args();
    let rounds = options.scale(3, 1);
    let round_trips = options.scale(2_000, 50);
    let warmup = options.scale(200, 10);
    let node = Node::start()?;
    let calls = remote_calls(&node.endpoint, warmup, options.scale(5_000, 50))?;
    let tcp_small = {
        let mut rtt = tcp_ping_pong(SMALL_BYTES, warmup, round_trips)?;
        Summary::of(&mut rtt)
    };
    let zenoh_query = zenoh_queries(warmup, options.scale(5_000, 50))?;
    Line::new("remote", "call", "stampede remote names()")
        .latency_us("", &calls)
        .field("calls", calls.n as u64)
        .ratio("bare zenoh query", calls.p50_ns / zenoh_query.p50_ns)
        .field("ratio_vs_raw_tcp_round_trip", calls.p50_ns / tcp_small.p50_ns)
        .emit();
    Line::new("remote", "call", "bare zenoh query (8 B reply)").latency_us("", &zenoh_query).emit();
    Line::new("remote", "call", "raw TCP round trip (8 B)").latency_us("", &tcp_small).emit();
    for payload_bytes in [SMALL_BYTES, IMAGE_BYTES] {
        let (mut remote_rtt, mut embedded_rtt, mut tcp_rtt) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let names = (format!("bench/ping{payload_bytes}-{round}"), format!("bench/pong{payload_bytes}-{round}"));
            remote_rtt.extend(remote_ping_pong(&node.endpoint, &names, payload_bytes, warmup, round_trips)?);
            embedded_rtt.extend(ping_pong::embedded(payload_bytes, warmup, round_trips * 4)?);
            tcp_rtt.extend(tcp_ping_pong(payload_bytes, warmup, round_trips)?);
        }
        let remote = Summary::of(&mut remote_rtt).divided(2.0);
        let embedded = Summary::of(&mut embedded_rtt).divided(2.0);
        let tcp = Summary::of(&mut tcp_rtt).divided(2.0);
        let case = case_name(payload_bytes);
        Line::new("remote", &case, "stampede remote (serve, tcp loopback)")
            .latency_us("", &remote)
            .field("round_trips", remote.n as u64)
            .ratio("stampede embedded", remote.p50_ns / embedded.p50_ns)
            .field("ratio_vs_raw_tcp", remote.p50_ns / tcp.p50_ns)
            .field("ratio_p99_vs_embedded", remote.p99_ns / embedded.p99_ns)
            .emit();
        Line::new("remote", &case, "stampede embedded").latency_us("", &embedded).emit();
        Line::new("remote", &case, "raw TCP ping-pong").latency_us("", &tcp).emit();
    }
    Ok(())
}

/// `stampede serve` on a free loopback TCP port; killed when dropped.
struct Node {
    child: Child,
    endpoint: String,
}

impl Node {
    fn start() -> BoxResult<Node> {
        let binary = std::env::current_exe()?.with_file_name("stampede");
        if !binary.exists() {
            return Err(format!("{} is missing: cargo build --release -p stampede-cli first", binary.display()).into());
        }
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let endpoint = format!("tcp/127.0.0.1:{port}");
        let mut child = Command::new(binary)
            .args(["serve", "--listen", &endpoint, "--name", "bench"])
            .stdout(Stdio::piped())
            .spawn()?;
        let mut line = String::new();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let node = Node { child, endpoint };
        BufReader::new(stdout).read_line(&mut line)?;
        if line.trim() != format!("listening on {}", node.endpoint) {
            return Err(format!("stampede serve said {line:?}").into());
        }
        Ok(node)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Times of `calls` single requests (`names` of an empty prefix: one small reply) after `warmup`
/// untimed ones.
fn remote_calls(endpoint: &str, warmup: usize, calls: usize) -> BoxResult<Summary> {
    let rt = connect(endpoint, Some(START_TIMEOUT))?;
    let mut ns = ping_pong::timed(warmup, calls, |_| rt.names("bench/none").map(drop))?;
    rt.close();
    Ok(Summary::of(&mut ns))
}

/// Times of `queries` bare zenoh queries (8-byte reply) between two sessions over loopback TCP.
fn zenoh_queries(warmup: usize, queries: usize) -> BoxResult<Summary> {
    use zenoh::Wait;
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let endpoint = format!("tcp/127.0.0.1:{port}");
    let config = |mode: &str, key: &str| -> BoxResult<zenoh::Config> {
        let mut config = zenoh::Config::default();
        config.insert_json5("mode", &format!("\"{mode}\""))?;
        config.insert_json5("scouting/multicast/enabled", "false")?;
        config.insert_json5(key, &format!("[\"{endpoint}\"]"))?;
        Ok(config)
    };
    let server = zenoh::open(config("router", "listen/endpoints")?).wait()?;
    let _queryable = server
        .declare_queryable("bench/echo")
        .callback(|query| {
            let _ = query.reply(query.key_expr().clone(), vec![0u8; 8]).wait();
        })
        .wait()?;
    let client = zenoh::open(config("client", "connect/endpoints")?).wait()?;
    let mut ns = ping_pong::timed(warmup, queries, |_| -> BoxResult<()> {
        let replies = client.get("bench/echo").timeout(START_TIMEOUT).wait()?;
        let reply = replies.recv()?;
        touch(&reply.result().map_err(|e| format!("{e:?}"))?.payload().to_bytes());
        Ok(())
    })?;
    client.close().wait()?;
    server.close().wait()?;
    Ok(Summary::of(&mut ns))
}

/// Round-trip times in ns of `round_trips` remote ping-pongs after `warmup` untimed ones.
fn remote_ping_pong(
    endpoint: &str,
    (ping_name, pong_name): &(String, String),
    payload_bytes: usize,
    warmup: usize,
    round_trips: usize,
) -> BoxResult<Vec<u64>> {
    let a_rt: Runtime = connect(endpoint, Some(START_TIMEOUT))?;
    let ping = a_rt.create_channel(ping_name, Limits::unbounded())?;
    let pong = a_rt.create_channel(pong_name, Limits::unbounded())?;
    // Earlier rounds on this node moved ts_min: a new root task starts at or above it.
    let base = a_rt.ts_min();
    let a = a_rt.task(base)?;
    let a_out = a.attach_output(&ping)?;
    let a_in = a.attach_input(&pong)?;
    let total = warmup + round_trips;

    let (attached, ready) = std::sync::mpsc::channel();
    let echo = {
        let (endpoint, ping_name, pong_name) = (endpoint.to_owned(), ping_name.clone(), pong_name.clone());
        thread::spawn(move || -> stampede::Result<()> {
            let b_rt = connect(&endpoint, Some(START_TIMEOUT))?;
            let b = b_rt.task(INFINITY)?;
            let b_in = b.attach_input(&b_rt.channel(&ping_name)?)?;
            let b_out = b.attach_output(&b_rt.channel(&pong_name)?)?;
            // B reads ping before A puts into it (else A's first frames go unread, and are reclaimed).
            let _ = attached.send(());
            let buf = source(payload_bytes, 0xb0);
            for _ in 0..total {
                let item = b_in.get(NEWEST_UNSEEN, None)?;
                touch(item.data());
                b_out.put(item.ts, buf.as_slice())?;
                b_in.consume(item.ts)?;
            }
            b_rt.close();
            Ok(())
        })
    };

    if ready.recv().is_err() {
        echo.join().expect("remote echo thread panicked")?;
        return Err("the echo client stopped before attaching".into());
    }
    let buf = source(payload_bytes, 0xa0);
    let rtt_ns = ping_pong::timed(warmup, round_trips, |i| -> stampede::Result<()> {
        let ts = base + ts_of(i);
        a_out.put(ts, buf.as_slice())?;
        a.set_virtual_time(ts + 1)?;
        touch(a_in.get(ts, None)?.data());
        a_in.consume(ts)
    })?;
    echo.join().expect("remote echo thread panicked")?;
    let (ping_stats, pong_stats) = (ping.stats(), pong.stats());
    assert_eq!((ping_stats.puts, pong_stats.puts), (total as u64, total as u64));
    assert_eq!((ping_stats.live_items, pong_stats.live_items), (0, 0), "everything was reclaimed");
    a_rt.close();
    Ok(rtt_ns)
}

/// Round-trip times in ns of a raw TCP ping-pong of `payload_bytes` each way on loopback.
fn tcp_ping_pong(payload_bytes: usize, warmup: usize, round_trips: usize) -> BoxResult<Vec<u64>> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let total = warmup + round_trips;
    let echo = thread::spawn(move || -> std::io::Result<()> {
        let (mut stream, _) = listener.accept()?;
        stream.set_nodelay(true)?;
        let mut buf = vec![0u8; payload_bytes];
        let answer = source(payload_bytes, 0xb0);
        for _ in 0..total {
            stream.read_exact(&mut buf)?;
            touch(&buf);
            stream.write_all(&answer)?;
        }
        Ok(())
    });
    let mut stream = TcpStream::connect(address)?;
    stream.set_nodelay(true)?;
    let buf = source(payload_bytes, 0xa0);
    let mut answer = vec![0u8; payload_bytes];
    let rtt_ns = ping_pong::timed(warmup, round_trips, |_| -> std::io::Result<()> {
        stream.write_all(&buf)?;
        stream.read_exact(&mut answer)?;
        touch(&answer);
        Ok(())
    })?;
    echo.join().expect("tcp echo thread panicked")?;
    Ok(rtt_ns)
}
