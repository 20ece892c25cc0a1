//! Stampede through a `stampede serve` node, across processes on loopback, beside the transports
//! and servers it could be replaced by, in one run (issue 11 items 3 and 4; `docs/BENCHMARKS.md`).
//! Every exchange, Stampede's and each reference's, runs between **two processes**: this one and
//! this program re-executed in a role (`--role <name>`, [`stampede_bench::process`]), so every row
//! pays the same process boundary. One JSON line per result.
//!
//! - latency, for 8 B, 1 KiB, 8 KiB and 60 KiB, p50 / p99 one way (= round trip / 2):
//!   - `stampede remote`: `handoff`'s ping-pong with A here and B in another process, each its
//!     own client session of the node ([`stampede_bench::remote::ping_pong`]); every Stampede
//!     line carries its ratios to raw TCP, a Unix socket, zenoh pub/sub, the zenoh query and
//!     Redis Streams of the same size. Its requests take the direct path (the node's abstract
//!     Unix socket); a second line has every request a zenoh query
//!     (`ConnectOptions::zenoh_only`), beside the bare zenoh query;
//!   - raw TCP and Unix-socket ping-pong ([`stampede_bench::reference::tcp`],
//!     [`stampede_bench::reference::unix`]);
//!   - bare zenoh pub/sub, peer to peer in the low-latency transport (60 KiB, which that transport
//!     cannot carry unfragmented, in the default one; the line says which:
//!     [`stampede_bench::reference::zenoh_pub_sub`]);
//!   - a bare zenoh query answered by a queryable process, Stampede's fabric configuration
//!     ([`stampede_bench::reference::zenoh_query`]);
//!   - Redis Streams `XADD` / `XREAD BLOCK` through a `redis-server` started here, or a line
//!     saying the row is skipped when there is none ([`stampede_bench::reference::redis`]).
//! - throughput of 230 400-byte frames, STM Fig. 11's configurations A (1 producer process → 1
//!   consumer) and B (2 producer processes → 2 consumers in a third), through the node
//!   ([`stampede_bench::remote::frames`]) beside a raw TCP stream (writer processes → reader
//!   threads, [`stampede_bench::reference::tcp::stream`]); frames/s, MB/s (10^6 bytes) and the
//!   ratio.
//! - a 6 MB frame on one host (a 1080p RGB image): an exact get of one already on the node, which
//!   arrives as a shared-memory segment ([`stampede_bench::remote::present_gets`]), beside the
//!   same get of 8 bytes and beside one 6 MB `memcpy`.
//! - call: one `names()` request, the fabric's fixed cost, beside the 8-byte zenoh query.
//! - Python: `python/bench/bench_remote.py` against the same node, Python process to Python
//!   process beside `multiprocessing.Queue` ([`stampede_bench::python`]); skipped, with a line
//!   saying so, without `.venv/bin/python` (or `$STAMPEDE_PYTHON`).
//! - the seeds' own figures, labelled with their hardware
//!   ([`stampede_bench::reference::seeds`]), and a first line describing this machine.
//!
//! Rounds alternate the implementations; latency rows pool the rounds' samples, throughput rows
//! keep each implementation's best round (the machine is shared: the best is the least
//! disturbed). `--quick`: a smoke run of every row with tiny counts (CI), figures meaningless.
//! Nothing here asserts a speed.
//!
//! Needs the `stampede` binary beside this one (`cargo build [--release] -p stampede-cli`) or in
//! `$STAMPEDE_BIN`; the Redis row needs `redis-server` on `PATH` (`apt-get install -y
//! redis-server`).

use stampede_bench::cli::Options;
use stampede_bench::kernel::Probe;
use stampede_bench::payload::{case_name, IMAGE_BYTES};
use stampede_bench::ping_pong::timed;
use stampede_bench::process::{Node, Role};
use stampede_bench::reference::redis::{self, RedisServer};
use stampede_bench::reference::{seeds, tcp, unix, zenoh_pub_sub, zenoh_query};
use stampede_bench::remote::{Via, FRAME_CAPACITY};
use stampede_bench::report::Line;
use stampede_bench::stats::{mb_per_s, Summary};
use stampede_bench::{python, remote};

use stampede_bench::BoxResult;

/// The payload sizes of every latency row: 8 B, 1 KiB, 8 KiB and 60 KiB (one message under the
/// 64 KiB of a zenoh batch; see [`zenoh_pub_sub::transport`] for the one transport it still does
/// not fit).
const PAYLOAD_BYTES: [usize; 4] = [8, 1024, 8 * 1024, 60 * 1024];

const BENCH: &str = "remote";
const BENCH_THROUGHPUT: &str = "remote_throughput";
const STAMPEDE: &str = "stampede remote (serve, tcp loopback)";
const STAMPEDE_PIPELINED: &str = "stampede remote (serve, tcp loopback, puts pipelined)";
const STAMPEDE_ZENOH_ONLY: &str = "stampede remote (serve, tcp loopback, zenoh queries only)";
const RAW_TCP: &str = "raw TCP ping-pong";
const UNIX_SOCKET: &str = "Unix-socket ping-pong";
const ZENOH_PUB_SUB: &str = "zenoh pub/sub (peer to peer)";
const ZENOH_QUERY: &str = "zenoh query (client -> router queryable, Querier)";
const REDIS_STREAMS: &str = "redis streams (XADD / XREAD BLOCK)";
const TCP_STREAM: &str = "raw TCP stream";
const PYTHON: &str = "stampede Python (serve, tcp loopback)";
const PRESENT_GET: &str = "stampede remote get, item present (serve, tcp loopback)";
const MEMCPY: &str = "memcpy";

/// A 1080p RGB frame: the large frame of the shared-memory row ("6 MB").
const LARGE_FRAME_BYTES: usize = 1920 * 1080 * 3;

/// The target for a 6 MB same-host get, in µs.
const LARGE_GET_TARGET_US: f64 = 20.0;

/// How much of everything one run does.
#[derive(Clone, Copy, Debug)]
struct Counts {
    /// Rounds; each starts fresh processes for every implementation.
    rounds: usize,
    /// Untimed round trips before each timed series.
    warmup: usize,
    /// Timed round trips per implementation, size and round.
    round_trips: usize,
    /// Frames per producer per throughput run.
    frames: usize,
    /// Timed `names()` calls.
    calls: usize,
    /// Timed gets of a present item per size.
    gets: usize,
}

fn main() -> BoxResult<()> {
    if let Some(role) = Role::from_args() {
        return run_role(&role);
    }
    let options = Options::from_args();
    let counts = Counts {
        rounds: options.scale(2, 1),
        warmup: options.scale(100, 5),
        round_trips: options.scale(1_000, 20),
        frames: options.scale(5_000, 10),
        gets: options.scale(300, 5),
        calls: options.scale(2_000, 20),
    };
    machine_line(&options, &counts);
    let node = Node::start()?;
    let redis = RedisServer::start()?;
    if redis.is_none() {
        Line::new(BENCH, "all sizes", REDIS_STREAMS)
            .field("skipped", true)
            .field("reason", format!("{} not found on PATH", redis::SERVER))
            .field("install", redis::INSTALL)
            .emit();
    }
    let mut query_8b_rtt = None;
    for payload_bytes in PAYLOAD_BYTES {
        let rtt = latencies(&node, redis.as_ref(), payload_bytes, &counts)?;
        if payload_bytes == 8 {
            query_8b_rtt = Some(rtt.zenoh_query);
        }
        rtt.emit(payload_bytes);
    }
    for (case, producers) in [(seeds::CASE_A, 1), (seeds::CASE_B, 2)] {
        throughput(&node, case, producers, &counts)?;
    }
    large_frames(&node, &counts)?;
    let calls = Summary::of(&mut remote::calls(&node.endpoint, counts.warmup, counts.calls)?);
    let mut line =
        Line::new(BENCH, "call", "stampede remote names()").latency_us("", &calls).field("calls", calls.n as u64);
    if let Some(query) = query_8b_rtt {
        line = line.ratio("zenoh query 8 B round trip", calls.p50_ns / query.p50_ns);
    }
    line.emit();
    python::run(BENCH, PYTHON, &node.endpoint, options.quick)?;
    seeds::emit_latencies(BENCH);
    seeds::emit_bandwidths(BENCH_THROUGHPUT);
    Ok(())
}

/// Runs this process as the role it was started in (see [`Role`]).
fn run_role(role: &Role) -> BoxResult<()> {
    match role.name.as_str() {
        remote::ECHO_ROLE => remote::echo_role(role),
        remote::PRODUCER_ROLE => remote::producer_role(role),
        tcp::ECHO_ROLE => tcp::echo_role(role),
        tcp::WRITER_ROLE => tcp::writer_role(role),
        unix::ECHO_ROLE => unix::echo_role(role),
        zenoh_pub_sub::ECHO_ROLE => zenoh_pub_sub::echo_role(role),
        zenoh_query::QUERYABLE_ROLE => zenoh_query::queryable_role(role),
        redis::ECHO_ROLE => redis::echo_role(role),
        other => Err(format!("unknown role {other:?}").into()),
    }
}

/// The first line: what this run ran on and with which counts.
fn machine_line(options: &Options, counts: &Counts) {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let cpu =
        cpuinfo.lines().find_map(|l| l.strip_prefix("model name")).map(|l| l.trim_start_matches([' ', '\t', ':']));
    let loadavg = read("/proc/loadavg").split_whitespace().take(3).collect::<Vec<_>>().join(" ");
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get() as u64);
    Line::new(BENCH, "machine", "this run")
        .field("cores", cores)
        .field("cpu", cpu.unwrap_or("unknown"))
        .field("kernel", read("/proc/sys/kernel/osrelease").trim())
        .field("loadavg", loadavg)
        .field("quick", options.quick)
        .field("rounds", counts.rounds as u64)
        .field("round_trips_per_round", counts.round_trips as u64)
        .field("frames_per_producer", counts.frames as u64)
        .emit();
}

/// Round-trip summaries of every implementation at one payload size.
struct RoundTrips {
    stampede: Summary,
    /// Stampede with every request a zenoh query.
    stampede_zenoh_only: Summary,
    raw_tcp: Summary,
    unix_socket: Summary,
    zenoh_pub_sub: Summary,
    zenoh_query: Summary,
    /// `None` when the Redis row is skipped.
    redis: Option<Summary>,
}

/// Every implementation's ping-pong at `payload_bytes`, alternating within each round.
fn latencies(node: &Node, redis: Option<&RedisServer>, payload_bytes: usize, counts: &Counts) -> BoxResult<RoundTrips> {
    let Counts { warmup, round_trips, .. } = *counts;
    let mut rtt: [Vec<u64>; 7] = Default::default();
    for round in 0..counts.rounds {
        for (i, zenoh_only) in [(0, false), (1, true)] {
            let via = Via { zenoh_only, ..Via::DEFAULT };
            let path = if zenoh_only { "z" } else { "" };
            let names = (
                format!("bench/ping{payload_bytes}-{round}{path}"),
                format!("bench/pong{payload_bytes}-{round}{path}"),
            );
            let counts = (warmup, round_trips);
            rtt[i].extend(remote::ping_pong(&node.endpoint, &names, payload_bytes, via, counts, &mut Probe::off())?);
        }
        rtt[2].extend(tcp::ping_pong(payload_bytes, warmup, round_trips)?);
        rtt[3].extend(unix::ping_pong(payload_bytes, warmup, round_trips, &mut Probe::off())?);
        rtt[4].extend(zenoh_pub_sub::ping_pong(payload_bytes, warmup, round_trips)?);
        rtt[5].extend(zenoh_query::ping_pong(payload_bytes, warmup, round_trips)?);
        if let Some(server) = redis {
            rtt[6].extend(redis::ping_pong(server, payload_bytes, round, warmup, round_trips)?);
        }
    }
    let [stampede, stampede_zenoh_only, raw_tcp, unix_socket, zenoh_pub_sub, zenoh_query, redis] =
        rtt.map(|mut ns| if ns.is_empty() { None } else { Some(Summary::of(&mut ns)) });
    let measured = "every implementation but Redis is always measured";
    Ok(RoundTrips {
        stampede: stampede.expect(measured),
        stampede_zenoh_only: stampede_zenoh_only.expect(measured),
        raw_tcp: raw_tcp.expect(measured),
        unix_socket: unix_socket.expect(measured),
        zenoh_pub_sub: zenoh_pub_sub.expect(measured),
        zenoh_query: zenoh_query.expect(measured),
        redis,
    })
}

impl RoundTrips {
    /// Prints one line per implementation, one way (round trip / 2); Stampede's first, with its
    /// ratios (p50 over p50, p99 over p99) to every reference.
    fn emit(&self, payload_bytes: usize) {
        let case = case_name(payload_bytes);
        let one_way = |s: &Summary| s.divided(2.0);
        let (stampede, raw_tcp) = (one_way(&self.stampede), one_way(&self.raw_tcp));
        let p50 = |reference: &Summary| self.stampede.p50_ns / reference.p50_ns;
        let p99 = |reference: &Summary| self.stampede.p99_ns / reference.p99_ns;
        let redis_p50 = self.redis.as_ref().map_or(f64::NAN, p50);
        let redis_p99 = self.redis.as_ref().map_or(f64::NAN, p99);
        let mut line = Line::new(BENCH, &case, STAMPEDE)
            .latency_us("", &stampede)
            .field("round_trips", stampede.n as u64)
            .field("requests", "default: the direct path (the node's abstract Unix socket)")
            .ratio(RAW_TCP, p50(&self.raw_tcp))
            .field("ratio_p99_vs_raw_tcp", p99(&self.raw_tcp))
            .field("ratio_vs_unix_socket", p50(&self.unix_socket))
            .field("ratio_vs_zenoh_pub_sub", p50(&self.zenoh_pub_sub))
            .field("ratio_vs_zenoh_query", p50(&self.zenoh_query))
            .field("ratio_p99_vs_zenoh_query", p99(&self.zenoh_query))
            .field("ratio_vs_redis_streams", redis_p50)
            .field("ratio_p99_vs_redis_streams", redis_p99);
        if let Some(seed_us) = seeds::stm_memory_channel_us(payload_bytes) {
            line = line.field("ratio_vs_seed_stm_memory_channel", stampede.p50_ns / 1e3 / seed_us);
        }
        line.emit();
        let zenoh_only = one_way(&self.stampede_zenoh_only);
        Line::new(BENCH, &case, STAMPEDE_ZENOH_ONLY)
            .latency_us("", &zenoh_only)
            .field("round_trips", zenoh_only.n as u64)
            .field("requests", "zenoh queries (ConnectOptions::zenoh_only)")
            .ratio(ZENOH_QUERY, self.stampede_zenoh_only.p50_ns / self.zenoh_query.p50_ns)
            .field("ratio_p99_vs_zenoh_query", self.stampede_zenoh_only.p99_ns / self.zenoh_query.p99_ns)
            .field("ratio_vs_raw_tcp", self.stampede_zenoh_only.p50_ns / self.raw_tcp.p50_ns)
            .field("ratio_vs_direct_path", self.stampede_zenoh_only.p50_ns / self.stampede.p50_ns)
            .emit();
        Line::new(BENCH, &case, RAW_TCP).latency_us("", &raw_tcp).field("round_trips", raw_tcp.n as u64).emit();
        let references = [
            (UNIX_SOCKET, Some(&self.unix_socket)),
            (ZENOH_PUB_SUB, Some(&self.zenoh_pub_sub)),
            (ZENOH_QUERY, Some(&self.zenoh_query)),
            (REDIS_STREAMS, self.redis.as_ref()),
        ];
        for (subject, summary) in references {
            let Some(summary) = summary else { continue };
            let reference = one_way(summary);
            let mut line = Line::new(BENCH, &case, subject)
                .latency_us("", &reference)
                .field("round_trips", reference.n as u64)
                .field("ratio_vs_raw_tcp", summary.p50_ns / self.raw_tcp.p50_ns);
            if subject == ZENOH_PUB_SUB {
                line = line.field("transport", zenoh_pub_sub::transport(payload_bytes));
            }
            line.emit();
        }
    }
}

/// One throughput case: `producers` producer processes → as many consumers, through the node
/// (each put waiting for its reply, then with puts pipelined, a window of the channel's
/// capacity) and on raw TCP, best of the rounds each, the three alternating.
fn throughput(node: &Node, case: &str, producers: usize, counts: &Counts) -> BoxResult<()> {
    let (mut stampede_ns, mut pipelined_ns, mut tcp_ns) = (u64::MAX, u64::MAX, u64::MAX);
    for round in 0..counts.rounds {
        let shape = (counts.frames, IMAGE_BYTES);
        let prefix = format!("bench/frames{producers}x{round}-");
        stampede_ns = stampede_ns.min(remote::frames(&node.endpoint, &prefix, producers, shape, 0)?);
        let prefix = format!("bench/frames{producers}x{round}p-");
        pipelined_ns = pipelined_ns.min(remote::frames(&node.endpoint, &prefix, producers, shape, FRAME_CAPACITY)?);
        tcp_ns = tcp_ns.min(tcp::stream(producers, counts.frames, IMAGE_BYTES)?);
    }
    let frames = (producers * counts.frames) as u64;
    let bytes = frames * IMAGE_BYTES as u64;
    let rate = |ns: u64| (frames as f64 / (ns as f64 / 1e9), mb_per_s(bytes, ns));
    let tcp_mb = rate(tcp_ns).1;
    for (subject, ns) in [(STAMPEDE, stampede_ns), (STAMPEDE_PIPELINED, pipelined_ns)] {
        let (fps, mb) = rate(ns);
        let mut line = Line::new(BENCH_THROUGHPUT, case, subject)
            .field("frames", frames)
            .field("frames_per_s", fps)
            .field("mb_per_s", mb)
            .ratio(TCP_STREAM, mb / tcp_mb);
        if subject == STAMPEDE_PIPELINED {
            line = line.field("put_window", FRAME_CAPACITY as u64);
        }
        if let Some(seed_mb) = seeds::stm_memory_channel_mb_per_s(case) {
            line = line.field("ratio_vs_seed_stm_memory_channel", mb / seed_mb);
        }
        line.emit();
    }
    if producers == 1 {
        puts_alone(node, case, counts, rate(tcp_ns).0)?;
    }
    let (tcp_fps, tcp_mb) = rate(tcp_ns);
    Line::new(BENCH_THROUGHPUT, case, TCP_STREAM)
        .field("frames", frames)
        .field("frames_per_s", tcp_fps)
        .field("mb_per_s", tcp_mb)
        .emit();
    Ok(())
}

/// The producer's side of `case` alone (no consumer, nothing bounded): its puts waited for, then
/// pipelined (a window of `FRAME_CAPACITY`), best of the rounds each, beside the raw TCP stream's
/// `tcp_fps`.
fn puts_alone(node: &Node, case: &str, counts: &Counts, tcp_fps: f64) -> BoxResult<()> {
    let (mut waited_ns, mut pipelined_ns) = (u64::MAX, u64::MAX);
    for round in 0..counts.rounds {
        let shape = (counts.frames, IMAGE_BYTES);
        waited_ns = waited_ns.min(remote::puts_alone(&node.endpoint, &format!("bench/puts{round}"), shape, 0)?);
        let name = format!("bench/puts{round}p");
        pipelined_ns = pipelined_ns.min(remote::puts_alone(&node.endpoint, &name, shape, FRAME_CAPACITY)?);
    }
    for (window, ns) in [(0, waited_ns), (FRAME_CAPACITY, pipelined_ns)] {
        let fps = counts.frames as f64 / (ns as f64 / 1e9);
        Line::new(BENCH_THROUGHPUT, &format!("{case}, puts alone"), STAMPEDE)
            .field("frames", counts.frames as u64)
            .field("frames_per_s", fps)
            .field("put_window", window as u64)
            .ratio(TCP_STREAM, fps / tcp_fps)
            .emit();
    }
    Ok(())
}

/// The same-host large frame: an exact get of a present 6 MB frame (a shared-memory segment)
/// beside the same get of 8 bytes and beside one 6 MB memcpy, p50 / p99.
fn large_frames(node: &Node, counts: &Counts) -> BoxResult<()> {
    let mut gets = Vec::new();
    for frame_bytes in [8, LARGE_FRAME_BYTES] {
        let name = format!("bench/present{frame_bytes}");
        let mut ns = remote::present_gets(&node.endpoint, &name, frame_bytes, (counts.warmup, counts.gets))?;
        gets.push(Summary::of(&mut ns));
    }
    let source = vec![0x5au8; LARGE_FRAME_BYTES];
    let mut target = vec![0u8; LARGE_FRAME_BYTES];
    let mut memcpy_ns = timed(counts.warmup, counts.gets, |_| -> Result<(), ()> {
        target.copy_from_slice(std::hint::black_box(&source));
        std::hint::black_box(&mut target);
        Ok(())
    })
    .expect("a copy cannot fail");
    let memcpy = Summary::of(&mut memcpy_ns);
    let [small, large] = [&gets[0], &gets[1]];
    let large_case = format!("{LARGE_FRAME_BYTES} B");
    Line::new(BENCH, &large_case, PRESENT_GET)
        .latency_us("", large)
        .field("gets", large.n as u64)
        .field("passed_as", "a shared-memory segment (sealed memfd on the node's Unix socket)")
        .ratio(MEMCPY, large.p50_ns / memcpy.p50_ns)
        .field("ratio_vs_8_b_get", large.p50_ns / small.p50_ns)
        .field("target_p50_us", LARGE_GET_TARGET_US)
        .emit();
    Line::new(BENCH, "8 B", PRESENT_GET).latency_us("", small).field("gets", small.n as u64).emit();
    Line::new(BENCH, &large_case, MEMCPY).latency_us("", &memcpy).field("copies", memcpy.n as u64).emit();
    Ok(())
}
