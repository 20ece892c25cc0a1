//! The references `remote` measures Stampede against, each across two processes on loopback
//! like Stampede itself: this process is one side, and this program re-executed in a role
//! ([`crate::process::Role`]) is the other. Each module holds both sides of its exchange: the
//! timed side (a function returning round-trip or run times) and the role (`*_role`).
//!
//! - [`tcp`] — raw TCP ping-pong (`TCP_NODELAY`, an echo process) and a raw TCP stream of
//!   frames (a writer process, a reader here): the floor of any TCP protocol on loopback.
//! - [`unix`] — the same ping-pong on a Unix stream socket: the floor of a local socket.
//! - [`zenoh_pub_sub`] — bare zenoh publication and subscription, peer to peer, in zenoh's
//!   low-latency transport where the payload fits it: the best zenoh does one way.
//! - [`zenoh_query`] — a bare zenoh queryable answering the payload back and a declared
//!   `Querier`, in Stampede's own fabric configuration (client session → router session): what
//!   one Stampede request rides on.
//! - [`redis`] — Redis Streams (`XADD` / `XREAD BLOCK`) through a `redis-server` the benchmark
//!   starts and stops: a store-and-forward stream server, like a Stampede node.
//! - [`seeds`] — the seeds' own figures (STM, D-Stampede), with their hardware.
//!
//! Every ping-pong returns round-trip times in ns; one way is round trip / 2, as for Stampede.

pub mod redis;
pub mod seeds;
pub mod tcp;
pub mod unix;
pub mod zenoh_pub_sub;
pub mod zenoh_query;

use crate::BoxResult;

/// A zenoh configuration in `mode` (`"peer"`, `"client"`, `"router"`) with multicast scouting
/// off, `endpoint` under `key` (`"listen/endpoints"` or `"connect/endpoints"`), and, when
/// `low_latency`, zenoh's low-latency unicast transport (`transport/unicast/lowlatency: true`,
/// which requires `transport/unicast/qos/enabled: false`; it does not fragment, so a message must
/// fit one batch, see [`zenoh_pub_sub`]).
pub fn zenoh_config(mode: &str, key: &str, endpoint: &str, low_latency: bool) -> BoxResult<zenoh::Config> {
    let mut config = zenoh::Config::default();
    config.insert_json5("mode", &format!("\"{mode}\""))?;
    config.insert_json5("scouting/multicast/enabled", "false")?;
    config.insert_json5(key, &format!("[\"{endpoint}\"]"))?;
    if low_latency {
        config.insert_json5("transport/unicast/lowlatency", "true")?;
        config.insert_json5("transport/unicast/qos/enabled", "false")?;
    }
    Ok(config)
}
