//! Bare zenoh publication and subscription, the best zenoh does one way: two **peer** sessions
//! connected directly over loopback TCP (no router in between), in zenoh's low-latency unicast
//! transport (`transport/unicast/lowlatency: true`, `transport/unicast/qos/enabled: false`: no
//! batching, no priorities). That transport does not fragment: a message must fit one batch,
//! whose size both ends negotiate from the TCP link (49 152 bytes on Linux loopback: the
//! accepting side takes multiples of half its MSS). Payloads above
//! [`LOW_LATENCY_PAYLOAD_BYTES_MAX`] (the 60 KiB row) therefore run in zenoh's default transport
//! (batching, fragmentation), and their lines say so ([`transport`]).
//!
//! This process declares a subscriber on `bench/pong` and a publisher on `bench/ping`
//! (`CongestionControl::Block`, express) and listens; the echo process ([`ECHO_ROLE`]) connects,
//! declares a subscriber on `bench/ping` whose callback (on zenoh's receiving thread, no hop)
//! touches the payload and publishes the answer, of the same size, on `bench/pong`. Both sides
//! wait until their publisher matches the other's subscriber before the first ping. This process
//! blocks on its subscriber's queue for each pong and touches it. One way = round trip / 2.

use std::time::{Duration, Instant};

use zenoh::bytes::ZBytes;
use zenoh::qos::CongestionControl;
use zenoh::Wait;

use super::zenoh_config;
use crate::payload::{source, touch};
use crate::ping_pong;
use crate::process::{free_port, Role, Spawned, EXCHANGE_TIMEOUT, START_TIMEOUT};

use crate::BoxResult;

/// The role of the echo process: `<endpoint to connect to> <payload_bytes> <low_latency>`.
pub const ECHO_ROLE: &str = "zenoh-pub-sub-echo";

/// The largest payload run in the low-latency transport: a power of two safely under the batch
/// negotiated on loopback (49 152 bytes), with room for zenoh's headers.
pub const LOW_LATENCY_PAYLOAD_BYTES_MAX: usize = 32 * 1024;

/// The zenoh transport the exchange of `payload_bytes` runs in: `"low latency"` or `"default"`.
pub fn transport(payload_bytes: usize) -> &'static str {
    if payload_bytes <= LOW_LATENCY_PAYLOAD_BYTES_MAX {
        "low latency"
    } else {
        "default (the payload does not fit the low-latency transport's unfragmented batch)"
    }
}

const PING_KEY: &str = "bench/ping";
const PONG_KEY: &str = "bench/pong";

/// Round-trip times in ns of `round_trips` publish → subscribe → publish back exchanges of
/// `payload_bytes` each way with an echo process, after `warmup` untimed ones.
pub fn ping_pong(payload_bytes: usize, warmup: usize, round_trips: usize) -> BoxResult<Vec<u64>> {
    let endpoint = format!("tcp/127.0.0.1:{}", free_port()?);
    let low_latency = payload_bytes <= LOW_LATENCY_PAYLOAD_BYTES_MAX;
    let session = zenoh::open(zenoh_config("peer", "listen/endpoints", &endpoint, low_latency)?).wait()?;
    let pongs = session.declare_subscriber(PONG_KEY).wait()?;
    let publisher =
        session.declare_publisher(PING_KEY).congestion_control(CongestionControl::Block).express(true).wait()?;
    let mut echo = Spawned::role(ECHO_ROLE, &[endpoint, payload_bytes.to_string(), low_latency.to_string()])?;
    echo.ready()?;
    until_matching("the echo's subscriber", || Ok(publisher.matching_status().wait()?.matching()))?;
    let ping = ZBytes::from(source(payload_bytes, 0xa0));
    let rtt_ns = ping_pong::timed(warmup, round_trips, |_| -> BoxResult<()> {
        publisher.put(ping.clone()).wait()?;
        let sample = pongs.recv_timeout(EXCHANGE_TIMEOUT)?.ok_or("zenoh pub/sub: no pong in time")?;
        touch(&sample.payload().to_bytes());
        Ok(())
    })?;
    echo.finish()?;
    publisher.undeclare().wait()?;
    session.close().wait()?;
    Ok(rtt_ns)
}

/// The echo process of [`ping_pong()`]: answers every ping until its stdin closes.
pub fn echo_role(role: &Role) -> BoxResult<()> {
    let endpoint: String = role.arg(0, "endpoint")?;
    let (payload_bytes, low_latency): (usize, bool) = (role.arg(1, "payload_bytes")?, role.arg(2, "low_latency")?);
    let session = zenoh::open(zenoh_config("peer", "connect/endpoints", &endpoint, low_latency)?).wait()?;
    let publisher =
        session.declare_publisher(PONG_KEY).congestion_control(CongestionControl::Block).express(true).wait()?;
    until_matching("the benchmark's subscriber", || Ok(publisher.matching_status().wait()?.matching()))?;
    let answer = ZBytes::from(source(payload_bytes, 0xb0));
    let _pings = session
        .declare_subscriber(PING_KEY)
        .callback(move |sample| {
            touch(&sample.payload().to_bytes());
            // A failed answer shows as the benchmark's timeout.
            let _ = publisher.put(answer.clone()).wait();
        })
        .wait()?;
    role.ready("")?;
    park_until_stdin_closes()
}

/// Polls `matching` (every millisecond, at most [`START_TIMEOUT`]) until it says a publisher or
/// querier reaches `what`.
pub(crate) fn until_matching(what: &str, matching: impl Fn() -> BoxResult<bool>) -> BoxResult<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    while !matching()? {
        if Instant::now() >= deadline {
            return Err(format!("zenoh: {what} was not declared within {START_TIMEOUT:?}").into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Blocks this thread for good: a role whose work runs in zenoh's callbacks ends when its stdin
/// closes ([`Role::from_args`] exits the process then).
pub(crate) fn park_until_stdin_closes() -> ! {
    loop {
        std::thread::park();
    }
}
