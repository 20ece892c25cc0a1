//! What the remote channel and queue types share: a container's handle in the session
//! ([`ContainerRef`]), and what every connection holds ([`Link`]): its handle, its task, and
//! whether it was detached.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::{Codec, Error, Info, InputOptions, Item, Limits, Payload, Result, Retention, Selector, Stats, Timestamp};

use crate::remote::client::Client;
use crate::remote::task::{RemoteTask, TaskRef};
use crate::wait::Changed;

use stampede_wire::{Handle, ItemHeader, Op, Outcome, WireOutcome};

/// Defines a container handle type (`RemoteChannel`, `RemoteQueue`) around a [`ContainerRef`]:
/// the struct and what both kinds offer (id, name, limits, stats, destroy, equality, debug).
macro_rules! container_handle {
    ($handle:ident, $kind:literal) => {
        #[doc = concat!("A ", $kind, " on the node (cheap to clone).")]
        #[derive(Clone)]
        pub(crate) struct $handle {
            container: crate::remote::connection::ContainerRef,
        }

        impl $handle {
            pub(crate) fn new(container: crate::remote::connection::ContainerRef) -> $handle {
                $handle { container }
            }

            #[doc = concat!("The ", $kind, "'s id, unique within the node's runtime.")]
            pub fn id(&self) -> u64 {
                self.container.id
            }

            #[doc = concat!("The ", $kind, "'s name.")]
            pub fn name(&self) -> &str {
                &self.container.name
            }

            #[doc = concat!("What the name service tells of the ", $kind, ".")]
            pub fn info(&self) -> crate::Info {
                self.container.info($kind)
            }

            #[doc = concat!("The ", $kind, "'s bounds.")]
            pub fn limits(&self) -> crate::Limits {
                self.container.limits
            }

            #[doc = concat!("The ", $kind, "'s counters on the node now (the last ones seen when the node cannot be reached).")]
            pub fn stats(&self) -> crate::Stats {
                self.container.stats()
            }

            #[doc = concat!("Runs `handler` on this client for each item the ", $kind, " reclaims on the node.")]
            pub fn on_reclaim(&self, handler: impl Fn(&crate::Item) + Send + Sync + 'static) -> crate::Result<()> {
                let registration = crate::remote::client::Registration::Container(self.container.id, std::sync::Arc::new(handler));
                self.container.client.on_reclaim(registration)
            }

            #[doc = concat!("Destroys the ", $kind, " on the node: its items are reclaimed, operations on it fail `Closed`.")]
            pub fn destroy(&self) -> crate::Result<()> {
                self.container.destroy()
            }
        }

        #[doc = concat!("Handles are equal when they refer to the same ", $kind, " through the same session.")]
        impl PartialEq for $handle {
            fn eq(&self, other: &$handle) -> bool {
                self.container.same(&other.container)
            }
        }

        impl Eq for $handle {}

        impl std::fmt::Debug for $handle {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.container.debug(stringify!($handle), f)
            }
        }
    };
}

pub(crate) use container_handle;

/// A channel or queue of the session: what its handle type holds.
#[derive(Clone)]
pub(crate) struct ContainerRef {
    pub(crate) client: Arc<Client>,
    pub(crate) id: Handle,
    pub(crate) name: Arc<str>,
    pub(crate) limits: Limits,
    pub(crate) retention: Retention,
    pub(crate) codec: Option<Codec>,
    pub(crate) description: Arc<str>,
    /// Counters and settledness when last asked, for when the node cannot be reached.
    pub(crate) known: Arc<Mutex<Known>>,
}

/// What a client last learned of a container.
#[derive(Default)]
pub(crate) struct Known {
    pub(crate) stats: Stats,
    pub(crate) settled_below: Timestamp,
    pub(crate) producers_closed: bool,
}

impl ContainerRef {
    pub(crate) fn info(&self, kind: &'static str) -> Info {
        Info {
            name: self.name.to_string(),
            kind,
            node: Some(self.client.node().to_owned()),
            limits: self.limits,
            codec: self.codec.clone(),
            description: self.description.to_string(),
        }
    }

    /// The container's counters on the node now (the last ones seen when it cannot be reached).
    pub(crate) fn stats(&self) -> Stats {
        let answer = self.client.call(Op::ContainerStats { container: self.id }, None, Duration::ZERO);
        let mut known = self.known.lock();
        if let Ok((Outcome::Stats(stats), _)) = answer {
            known.stats = stats;
        }
        known.stats.clone()
    }

    /// Destroys the container on the node.
    pub(crate) fn destroy(&self) -> Result<()> {
        let destroyed = self.client.done(Op::Destroy { container: self.id });
        // Whatever the reply, the destroy may have happened: no cache answers for it any more.
        self.client.forget_caches_of(self.id);
        destroyed
    }

    /// Attaches an input (`input`) or output connection of `task`.
    pub(crate) fn attach(&self, task: &RemoteTask, input: Option<InputOptions>) -> Result<Link> {
        let id = task.attach(&self.client, &self.name, input, self.id)?;
        Ok(Link::new(self.client.clone(), task.inner.clone(), id, self.name.clone()))
    }

    /// Timestamps of the items the channel stores now (none when the node cannot be reached).
    pub(crate) fn timestamps(&self) -> Vec<Timestamp> {
        match self.client.call(Op::Timestamps { container: self.id }, None, Duration::ZERO) {
            Ok((Outcome::Timestamps(timestamps), _)) => timestamps,
            _ => Vec::new(),
        }
    }

    /// The channel's settled horizon and whether its producer set is closed (as last seen when
    /// the node cannot be reached: both only ever grow).
    pub(crate) fn settledness(&self) -> (Timestamp, bool) {
        let answer = self.client.call(Op::Settledness { container: self.id }, None, Duration::ZERO);
        let mut known = self.known.lock();
        if let Ok((Outcome::Settledness { settled_below, producers_closed }, _)) = answer {
            known.settled_below = known.settled_below.max(settled_below);
            known.producers_closed |= producers_closed;
        }
        (known.settled_below, known.producers_closed)
    }

    /// Closes the channel's producer set on the node.
    pub(crate) fn close_producers(&self) -> Result<()> {
        self.client.done(Op::CloseProducers { container: self.id })
    }

    /// `true` when both refer to the same container through the same session.
    pub(crate) fn same(&self, other: &ContainerRef) -> bool {
        Arc::ptr_eq(&self.client, &other.client) && self.id == other.id
    }

    pub(crate) fn debug(&self, kind: &str, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(kind).field("name", &self.name).field("node", &self.client.node()).finish()
    }
}

/// A connection's handle on the node. Dropping it detaches the connection there (without waiting).
pub(crate) struct Link {
    pub(crate) client: Arc<Client>,
    /// Keeps the task alive while the connection is, as embedded.
    _task: Arc<TaskRef>,
    pub(crate) id: Handle,
    /// The channel's or queue's name, for errors.
    pub(crate) name: Arc<str>,
    /// The name's index in the event log, once traced.
    trace_name: std::sync::OnceLock<u32>,
    detached: AtomicBool,
}

impl Link {
    pub(crate) fn new(client: Arc<Client>, task: Arc<TaskRef>, id: Handle, name: Arc<str>) -> Link {
        Link { client, _task: task, id, name, trace_name: std::sync::OnceLock::new(), detached: AtomicBool::new(false) }
    }

    /// The container's name in the event log (0 while tracing is off).
    pub(crate) fn trace_name(&self) -> u32 {
        crate::trace::cached_name(&self.trace_name, &self.name)
    }

    /// `Closed` (the embedded error) once detached, without asking the node.
    pub(crate) fn check_attached(&self) -> Result<()> {
        if self.detached.load(Ordering::SeqCst) {
            return Err(Error::detached(&self.name));
        }
        Ok(())
    }

    /// A request answered by `Done`.
    pub(crate) fn done(&self, request: Op) -> Result<()> {
        self.check_attached()?;
        self.client.done(request)
    }

    /// Sends `request` without waiting for its reply (see [`Client::send`]), once this side
    /// knows it is attached and its session open: those errors are the caller's.
    pub(crate) fn send(&self, request: Op) -> Result<()> {
        self.check_attached()?;
        self.client.check_open(request.name())?;
        self.client.send(request);
        Ok(())
    }

    /// A request that may wait up to `timeout`, answered with the reply and its payload.
    pub(crate) fn waiting(
        &self,
        timeout: Option<Duration>,
        payload: Option<Bytes>,
        request: impl Fn(u64) -> Op,
    ) -> Result<(WireOutcome, Bytes)> {
        self.check_attached()?;
        self.client.call_waiting(timeout, payload, request)
    }

    /// [`waiting`](Self::waiting) without blocking a thread.
    pub(crate) async fn waiting_async(
        &self,
        timeout: Option<Duration>,
        payload: Option<Bytes>,
        request: impl Fn(u64) -> Op,
    ) -> Result<(WireOutcome, Bytes)> {
        self.check_attached()?;
        self.client.call_waiting_async(timeout, payload, request).await
    }

    /// A readiness future: completes when what would wake a get (`selector`; a queue input:
    /// `None`) or a put (an output: `None`) blocked on this connection happens on the node, after
    /// one wait slice, or when the node cannot be reached (the caller's next attempt says why).
    /// The request is sent now, before the caller's attempt, so a change after the node
    /// registered it is never missed; it may complete spuriously, as every [`crate::Changed`].
    pub(crate) fn changed(&self, selector: Option<Selector>) -> Changed {
        self.client.changed(|wait_us| Op::WaitChanged { connection: self.id, selector, wait_us })
    }

    /// Detaches on the node (waiting for it: claims are dropped when this returns). Idempotent.
    pub(crate) fn detach(&self) {
        if !self.detached.swap(true, Ordering::SeqCst) {
            let _ = self.client.done(Op::Detach { connection: self.id });
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        if !self.detached.load(Ordering::SeqCst) {
            self.client.send(Op::Detach { connection: self.id });
        }
    }
}

/// An item from its header and payload bytes.
pub(crate) fn item(header: ItemHeader, data: Bytes) -> Item {
    Item { ts: header.ts, payload: Payload { data, codec: crate::Codec::from_name(&header.codec) } }
}
