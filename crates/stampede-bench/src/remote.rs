//! Stampede's side of `remote`: every exchange through a `stampede serve` node
//! ([`crate::process::Node`]) between client sessions in **different processes**, with the public
//! client API only (`stampede::connect`, tasks, `attach_output().put`, `attach_input().get` +
//! `consume`).
//!
//! - [`ping_pong()`]: `handoff`'s ping-pong ([`crate::ping_pong`]) with B in another process. A
//!   (this process, virtual time `i`) puts `ts=i` into `ping`, advances its virtual time, blocks
//!   on an exact get of `i` from `pong`, consumes it; B ([`ECHO_ROLE`], virtual time `INFINITY`)
//!   blocks on `NEWEST_UNSEEN` of `ping`, puts its answer at the same ts into `pong`, consumes.
//!   Each call is one request to the node (A: put, set_virtual_time, get, consume; B: get, put,
//!   consume). One way = round trip / 2. Both clients reach the node at a loopback `tcp/`
//!   endpoint, so their requests take the direct path (the node's abstract Unix socket,
//!   `docs/NODES.md`) unless `zenoh_only` (`ConnectOptions::zenoh_only`: every request a zenoh
//!   query).
//! - [`frames`]: STM Fig. 11's configurations. Each producer process ([`PRODUCER_ROLE`], its own
//!   session, a root task at ts_min) puts frames into a channel of its own (bounded to
//!   [`FRAME_CAPACITY`] items, so a producer ahead of its consumer blocks) and advances its
//!   virtual time past each; this process (one session) runs one consumer task per channel, each
//!   on its thread, getting `OLDEST_UNSEEN` (every frame, in order), touching and consuming it.
//!   1 → 1 is configuration A, 2 → 2 (two producer processes, two consumers in a third) is B.
//!   With a `put_window`, the producers' puts are pipelined (`OutputOptions::put_window`).
//! - [`present_gets`]: an exact get of an item already on the node, 8 B to a 6 MB frame (which
//!   arrives as a shared-memory segment).
//! - [`calls`]: one `names` request (no payload, no wait): the fabric's fixed cost per call.

use std::thread;
use std::time::{Duration, Instant};

use stampede::{
    connect, connect_with, ConnectOptions, Limits, OutputOptions, Prefetch, PutOptions, Runtime, INFINITY,
    NEWEST_UNSEEN, OLDEST_UNSEEN,
};

use crate::kernel::Probe;
use crate::payload::{source, touch};
use crate::ping_pong::timed;
use crate::pipe::ts_of;
use crate::process::{Role, Spawned, EXCHANGE_TIMEOUT, START_TIMEOUT};
use crate::stats::elapsed_ns;

use crate::BoxResult;

/// The role of B, the echo client: `<endpoint> <ping channel> <pong channel> <payload_bytes>
/// <round_trips> <zenoh_only> <prefetch>`.
pub const ECHO_ROLE: &str = "stampede-echo";

/// The role of a frame producer: `<endpoint> <channel> <frames> <frame_bytes> <put_window>`.
pub const PRODUCER_ROLE: &str = "stampede-producer";

/// Longest wait, after a ping-pong, for its last items to be reclaimed.
pub const RECLAIM_TIMEOUT: Duration = Duration::from_secs(10);

/// Items a frame channel holds at most: a producer this far ahead of its consumer blocks until
/// the consumer frees room (the node then holds at most this many frames per channel).
pub const FRAME_CAPACITY: usize = 4;

/// Round-trip times in ns of `round_trips` remote ping-pongs after `warmup` untimed ones, A in
/// this process and B in another, through the node at `endpoint`, on two channels named `names`;
/// the clients reaching it `via`. `probe` samples its processes and B (`"B"`)
/// around every round trip, warm-up included.
pub fn ping_pong(
    endpoint: &str,
    (ping_name, pong_name): &(String, String),
    payload_bytes: usize,
    via: Via,
    (warmup, round_trips): (usize, usize),
    probe: &mut Probe,
) -> BoxResult<Vec<u64>> {
    let a_rt = session(endpoint, via)?;
    let ping = a_rt.create_channel(ping_name, Limits::unbounded())?;
    let pong = a_rt.create_channel(pong_name, Limits::unbounded())?;
    // Earlier rounds on this node moved ts_min: a new root task starts at or above it.
    let base = a_rt.ts_min();
    let a = a_rt.task(base)?;
    let a_out = a.attach_output(&ping)?;
    let a_in = a.attach_input(&pong)?;
    let total = warmup + round_trips;

    let args = [endpoint, ping_name, pong_name].map(str::to_owned);
    let args = [
        &args[..],
        &[payload_bytes.to_string(), total.to_string(), via.zenoh_only.to_string(), via.prefetch.to_string()],
    ]
    .concat();
    let mut b = Spawned::role(ECHO_ROLE, &args)?;
    // B reads ping before A puts into it (else A's first frames go unread, and are reclaimed).
    b.ready()?;
    probe.add("B", b.pid());
    probe.start()?;
    let buf = source(payload_bytes, 0xa0);
    let rtt_ns = timed(warmup, round_trips, |i| -> stampede::Result<()> {
        let ts = base + ts_of(i);
        a_out.put(ts, buf.as_slice())?;
        a.set_virtual_time(ts + 1)?;
        touch(a_in.get(ts, Some(EXCHANGE_TIMEOUT))?.data());
        a_in.consume(ts)
    })?;
    probe.stop()?;
    b.finish()?;
    let (ping_stats, pong_stats) = (ping.stats(), pong.stats());
    assert_eq!((ping_stats.puts, pong_stats.puts), (total as u64, total as u64));
    // A consume is sent without waiting for its reply, and B's session ends after its process:
    // the last items go within a bounded time, not at once.
    let start = Instant::now();
    let live = || (ping.stats().live_items, pong.stats().live_items);
    while live() != (0, 0) {
        if start.elapsed() > RECLAIM_TIMEOUT {
            return Err(format!(
                "{ping_name}, {pong_name}: items {:?} still live {RECLAIM_TIMEOUT:?} after the run",
                live()
            )
            .into());
        }
        thread::sleep(Duration::from_millis(1));
    }
    a_rt.close();
    Ok(rtt_ns)
}

/// How the clients of a [`ping_pong()`] reach the node.
#[derive(Clone, Copy, Debug)]
pub struct Via {
    /// Every request a zenoh query (`ConnectOptions::zenoh_only`), not the direct path.
    pub zenoh_only: bool,
    /// The clients' prefetch policy (`off`: every get a request and its reply).
    pub prefetch: Prefetch,
}

impl Via {
    /// The direct path with prefetch `auto`: what a client of the node on this host gets.
    pub const DEFAULT: Via = Via { zenoh_only: false, prefetch: Prefetch::Auto };
}

/// A session of the node at `endpoint` (waiting at most [`START_TIMEOUT`] for it), reached `via`.
fn session(endpoint: &str, via: Via) -> stampede::Result<Runtime> {
    let Via { zenoh_only, prefetch } = via;
    let options = ConnectOptions { timeout: Some(START_TIMEOUT), zenoh_only, prefetch, ..ConnectOptions::default() };
    connect_with(endpoint, &options)
}

/// B of [`ping_pong()`], in its own process and session.
pub fn echo_role(role: &Role) -> BoxResult<()> {
    let endpoint: String = role.arg(0, "endpoint")?;
    let (ping_name, pong_name): (String, String) = (role.arg(1, "ping channel")?, role.arg(2, "pong channel")?);
    let (payload_bytes, total): (usize, usize) = (role.arg(3, "payload_bytes")?, role.arg(4, "round_trips")?);
    let prefetch: String = role.arg(6, "prefetch")?;
    let prefetch = Prefetch::parse(&prefetch)?;
    let b_rt = session(&endpoint, Via { zenoh_only: role.arg(5, "zenoh_only")?, prefetch })?;
    let b = b_rt.task(INFINITY)?;
    let b_in = b.attach_input(&b_rt.channel(&ping_name)?)?;
    let b_out = b.attach_output(&b_rt.channel(&pong_name)?)?;
    role.ready("")?;
    let buf = source(payload_bytes, 0xb0);
    for _ in 0..total {
        let item = b_in.get(NEWEST_UNSEEN, Some(EXCHANGE_TIMEOUT))?;
        touch(item.data());
        b_out.put(item.ts, buf.as_slice())?;
        b_in.consume(item.ts)?;
    }
    b_rt.close();
    Ok(())
}

/// Nanoseconds from the common start until one consumer task per producer process, all in this
/// process's session, has got and consumed `frames` frames of `frame_bytes` from its producer;
/// the channels are named `<prefix><k>`.
pub fn frames(
    endpoint: &str,
    prefix: &str,
    producers: usize,
    (frames, frame_bytes): (usize, usize),
    put_window: usize,
) -> BoxResult<u64> {
    let rt = connect(endpoint, Some(START_TIMEOUT))?;
    let mut channels = Vec::with_capacity(producers);
    let mut inputs = Vec::with_capacity(producers);
    let mut tasks = Vec::with_capacity(producers);
    for k in 0..producers {
        let channel = rt.create_channel(&format!("{prefix}{k}"), Limits::items(FRAME_CAPACITY))?;
        let task = rt.task(INFINITY)?;
        // Attached before the producer starts: every frame has a reader, none is reclaimed unread.
        inputs.push(task.attach_input(&channel)?);
        tasks.push(task);
        channels.push(channel);
    }
    let mut processes = Vec::with_capacity(producers);
    for channel in &channels {
        let args = [
            endpoint.to_owned(),
            channel.name().to_owned(),
            frames.to_string(),
            frame_bytes.to_string(),
            put_window.to_string(),
        ];
        let mut producer = Spawned::role(PRODUCER_ROLE, &args)?;
        producer.ready()?;
        processes.push(producer);
    }
    let start = Instant::now();
    for producer in &mut processes {
        producer.go()?;
    }
    let ends_ns = thread::scope(|scope| {
        let consumers: Vec<_> = inputs
            .into_iter()
            .map(|input| {
                scope.spawn(move || -> stampede::Result<u64> {
                    for _ in 0..frames {
                        let item = input.get(OLDEST_UNSEEN, Some(EXCHANGE_TIMEOUT))?;
                        touch(item.data());
                        input.consume(item.ts)?;
                    }
                    Ok(elapsed_ns(start))
                })
            })
            .collect();
        consumers.into_iter().map(|c| c.join().expect("consumer thread panicked")).collect::<Result<Vec<_>, _>>()
    })?;
    for producer in processes {
        producer.finish()?;
    }
    for channel in &channels {
        assert_eq!(channel.stats().puts, frames as u64, "channel {:?}: puts", channel.name());
    }
    rt.close();
    Ok(ends_ns.into_iter().max().unwrap_or(0))
}

/// A producer of [`frames`], in its own process and session: a root task at ts_min puts frame
/// `i` at `ts_min + i` and advances its virtual time past it.
pub fn producer_role(role: &Role) -> BoxResult<()> {
    let (endpoint, name): (String, String) = (role.arg(0, "endpoint")?, role.arg(1, "channel")?);
    let (frames, frame_bytes): (usize, usize) = (role.arg(2, "frames")?, role.arg(3, "frame_bytes")?);
    let put_window: usize = role.arg(4, "put_window")?;
    let rt = connect(&endpoint, Some(START_TIMEOUT))?;
    let channel = rt.channel(&name)?;
    let base = rt.ts_min();
    let task = rt.task(base)?;
    let out = task.attach_output_with(&channel, OutputOptions { put_window })?;
    let frame = source(frame_bytes, 0xc0);
    let options = PutOptions { timeout: Some(EXCHANGE_TIMEOUT), ..PutOptions::default() };
    role.ready("")?;
    role.wait_go()?;
    for i in 0..frames {
        let ts = base + ts_of(i);
        out.put_with(ts, frame.as_slice(), options)?;
        task.set_virtual_time(ts + 1)?;
    }
    out.flush()?;
    rt.close();
    Ok(())
}

/// Time in ns for this process to put `frames` frames of `frame_bytes` into a channel of its own
/// that nobody reads (each frame garbage once the producer's virtual time passes it), with
/// `put_window` puts pipelined: what the producer's side costs alone, without a consumer's gets.
pub fn puts_alone(
    endpoint: &str,
    name: &str,
    (frames, frame_bytes): (usize, usize),
    put_window: usize,
) -> BoxResult<u64> {
    let rt = connect(endpoint, Some(START_TIMEOUT))?;
    let channel = rt.create_channel(name, Limits::unbounded())?;
    let base = rt.ts_min();
    let task = rt.task(base)?;
    let out = task.attach_output_with(&channel, OutputOptions { put_window })?;
    let frame = source(frame_bytes, 0xc1);
    let start = Instant::now();
    for i in 0..frames {
        let ts = base + ts_of(i);
        out.put(ts, frame.as_slice())?;
        task.set_virtual_time(ts + 1)?;
    }
    out.flush()?;
    let ns = elapsed_ns(start);
    assert_eq!(channel.stats().puts, frames as u64, "channel {name:?}: puts");
    rt.close();
    Ok(ns)
}

/// Times in ns of `calls` single requests (`names` of a prefix with nothing under it: one small
/// reply) after `warmup` untimed ones.
pub fn calls(endpoint: &str, warmup: usize, calls: usize) -> BoxResult<Vec<u64>> {
    let rt = connect(endpoint, Some(START_TIMEOUT))?;
    let ns = timed(warmup, calls, |_| rt.names("bench/none").map(drop))?;
    rt.close();
    Ok(ns)
}

/// Times in ns of `gets` exact gets of items already present on the node, each of
/// `frame_bytes`, after `warmup` untimed ones; each get touches the item's first and last byte.
/// A producer process ([`PRODUCER_ROLE`]) puts the frames into a channel named `name`, at most
/// [`FRAME_CAPACITY`] ahead. Each frame is got twice: once waiting for it (untimed), then again,
/// present (timed), then consumed. From a client on the node's host, a frame of at least
/// `SHARED_BYTES_MIN` arrives as a shared-memory segment: this is what `get` costs then.
pub fn present_gets(
    endpoint: &str,
    name: &str,
    frame_bytes: usize,
    (warmup, gets): (usize, usize),
) -> BoxResult<Vec<u64>> {
    let rt = connect(endpoint, Some(START_TIMEOUT))?;
    let channel = rt.create_channel(name, Limits::items(FRAME_CAPACITY))?;
    let task = rt.task(INFINITY)?;
    let input = task.attach_input(&channel)?;
    let total = warmup + gets;
    let args = [endpoint.to_owned(), name.to_owned(), total.to_string(), frame_bytes.to_string(), 0.to_string()];
    let mut producer = Spawned::role(PRODUCER_ROLE, &args)?;
    producer.ready()?;
    producer.go()?;
    let mut ns = Vec::with_capacity(gets);
    for i in 0..total {
        let ts = input.get(OLDEST_UNSEEN, Some(EXCHANGE_TIMEOUT))?.ts;
        let start = Instant::now();
        touch(input.get(ts, Some(EXCHANGE_TIMEOUT))?.data());
        if i >= warmup {
            ns.push(elapsed_ns(start));
        }
        input.consume(ts)?;
    }
    producer.finish()?;
    rt.close();
    Ok(ns)
}
