//! A bare zenoh query doing the ping-pong's exchange, in Stampede's own fabric configuration: the
//! queryable process ([`QUERYABLE_ROLE`]) is a **router** session listening on loopback TCP, like
//! `stampede serve`; this process is a **client** session connected to it, like a Stampede
//! client. Default transport (QoS on, batching, fragmentation), multicast scouting off.
//!
//! This process declares a `Querier` on `bench/echo` (consolidation `None`, as Stampede's
//! requests; waits until it matches the queryable) and, per round trip, sends one query carrying
//! the payload and blocks for the first reply. The queryable's callback (on zenoh's receiving
//! thread) touches the query's payload and replies with a payload of the same size. One way =
//! round trip / 2.

use zenoh::bytes::ZBytes;
use zenoh::query::ConsolidationMode;
use zenoh::Wait;

use super::zenoh_config;
use super::zenoh_pub_sub::{park_until_stdin_closes, until_matching};
use crate::payload::{source, touch};
use crate::ping_pong;
use crate::process::{free_port, Role, Spawned, EXCHANGE_TIMEOUT};

use crate::BoxResult;

/// The role of the queryable process: `<endpoint to listen on> <payload_bytes>`.
pub const QUERYABLE_ROLE: &str = "zenoh-queryable";

const KEY: &str = "bench/echo";

/// Round-trip times in ns of `round_trips` queries carrying `payload_bytes` answered with as
/// many by a queryable process, after `warmup` untimed ones.
pub fn ping_pong(payload_bytes: usize, warmup: usize, round_trips: usize) -> BoxResult<Vec<u64>> {
    let endpoint = format!("tcp/127.0.0.1:{}", free_port()?);
    let mut queryable = Spawned::role(QUERYABLE_ROLE, &[endpoint.clone(), payload_bytes.to_string()])?;
    queryable.ready()?;
    let session = zenoh::open(zenoh_config("client", "connect/endpoints", &endpoint, false)?).wait()?;
    let querier =
        session.declare_querier(KEY).consolidation(ConsolidationMode::None).timeout(EXCHANGE_TIMEOUT).wait()?;
    until_matching("the queryable", || Ok(querier.matching_status().wait()?.matching()))?;
    let ping = ZBytes::from(source(payload_bytes, 0xa0));
    let rtt_ns = ping_pong::timed(warmup, round_trips, |_| -> BoxResult<()> {
        let replies = querier.get().payload(ping.clone()).wait()?;
        let reply = replies.recv_timeout(EXCHANGE_TIMEOUT)?.ok_or("zenoh query: no reply in time")?;
        let sample = reply.result().map_err(|e| format!("zenoh query: error reply {e:?}"))?;
        touch(&sample.payload().to_bytes());
        Ok(())
    })?;
    querier.undeclare().wait()?;
    session.close().wait()?;
    queryable.finish()?;
    Ok(rtt_ns)
}

/// The queryable process of [`ping_pong()`]: answers every query until its stdin closes.
pub fn queryable_role(role: &Role) -> BoxResult<()> {
    let endpoint: String = role.arg(0, "endpoint")?;
    let payload_bytes: usize = role.arg(1, "payload_bytes")?;
    let session = zenoh::open(zenoh_config("router", "listen/endpoints", &endpoint, false)?).wait()?;
    let answer = ZBytes::from(source(payload_bytes, 0xb0));
    let _queryable = session
        .declare_queryable(KEY)
        .callback(move |query| {
            if let Some(payload) = query.payload() {
                touch(&payload.to_bytes());
            }
            // A failed reply shows as the benchmark's timeout.
            let _ = query.reply(query.key_expr().clone(), answer.clone()).wait();
        })
        .wait()?;
    role.ready("")?;
    park_until_stdin_closes()
}
