//! The channels a recorder follows: which ones the names select, how it attaches to each (so
//! that it holds every item it has not written), and how it reads them.
//!
//! Reads never lose an item: a get that fails `Unreachable` (a reply lost on the way from a node)
//! is tried again next turn; a consume that fails so is tried again at the next turn (the item
//! stays open — claimed — meanwhile). A channel ends when it is destroyed, or when its node stays
//! unreachable for [`UNREACHABLE_FOR`].

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use stampede::{
    Changed, Channel, ChannelInput, Container, Error, Item, Runtime, Selector, Task, Timestamp, Watch, WatchEvent,
    INFINITY, OLDEST_UNSEEN,
};

use crate::error::RecordResult;

/// Most tries to start a task at ts_min while ts_min keeps moving past it.
const TS_MIN_TRIES_MAX: usize = 100;

/// How long a channel's node may stay unreachable before the channel counts as ended.
pub const UNREACHABLE_FOR: Duration = Duration::from_secs(10);

/// Tries at reading a channel's put count and its items together while puts keep coming.
const COUNT_TRIES_MAX: usize = 3;

/// The channels `names` select (each once), and the queues a prefix selected. A name that
/// selects nothing is `NotFound` (a typo would otherwise record nothing), except `""`.
pub(crate) fn select(rt: &Runtime, names: &[String]) -> RecordResult<(Vec<Channel>, Vec<String>)> {
    if names.is_empty() {
        let reason = "no names to record: give channel names or prefixes (\"\" for every channel)".into();
        return Err(Error::InvalidArgument { op: "record", name: String::new(), reason }.into());
    }
    let mut channels: Vec<Channel> = Vec::new();
    let mut queues = Vec::new();
    for selector in names {
        let found = rt.names(selector)?;
        if found.is_empty() && !selector.is_empty() {
            return Err(Error::NotFound { name: format!("{selector} (no channel is named so or under it)") }.into());
        }
        for name in found {
            match rt.lookup(&name)? {
                Container::Channel(ch) if !channels.iter().any(|c| c.name() == ch.name()) => channels.push(ch),
                Container::Channel(_) => {}
                Container::Queue(_) if name == *selector => {
                    let reason = "is a queue; queues are not recorded (a recorder would take items from the workers)";
                    return Err(Error::InvalidArgument { op: "record", name, reason: reason.into() }.into());
                }
                Container::Queue(_) => queues.push(name),
            }
        }
    }
    Ok((channels, queues))
}

/// A channel followed by the recorder.
pub(crate) struct Followed {
    pub(crate) name: String,
    pub(crate) channel: Channel,
    input: ChannelInput,
    /// The task holding `input` (it must live as long as the connection).
    _task: Task,
    /// The channel's next item, gotten (so open: still claimed) and not yet written.
    pub(crate) head: Option<Item>,
    /// Without a head: completes when an item may have arrived since the last look (registered
    /// before it), so an empty channel costs no get — no round trip through a node — until then.
    changed: Option<Pin<Box<Changed>>>,
    /// Why the channel ended (destroyed, or its node gone), once it did.
    pub(crate) ended: Option<String>,
    /// Puts into the channel before the recording (those already gone when it attached).
    before: u64,
    /// Items of this channel written.
    pub(crate) written: u64,
    /// Written items whose consume did not reach the node; consumed again at the next turn.
    unconsumed: VecDeque<Timestamp>,
    /// Since when the channel's node could not be reached, if it cannot now.
    unreachable_since: Option<Instant>,
    /// Once the recorder stops: the channel's put count when it did (`None`: not known).
    puts_at_stop: Option<u64>,
}

impl Followed {
    /// Attaches at ts_min, so every item present is recorded, then lets the task's virtual time
    /// go to `INFINITY` (its connection's claims alone hold what it has not written).
    pub(crate) fn attach(rt: &Runtime, channel: &Channel) -> stampede::Result<Followed> {
        let task = root_task_at_ts_min(rt)?;
        let _ = task.set_name(&format!("recorder:{}", channel.name()));
        let input = task.attach_input(channel)?;
        task.set_virtual_time(INFINITY)?;
        // Every item put from now on, and every one present, is unseen on `input` (so held).
        let present = channel.stats();
        Ok(Followed {
            name: channel.name().to_owned(),
            channel: channel.clone(),
            input,
            _task: task,
            head: None,
            changed: None,
            ended: None,
            before: present.puts.saturating_sub(present.live_items as u64),
            written: 0,
            unconsumed: VecDeque::new(),
            unreachable_since: None,
            puts_at_stop: None,
        })
    }

    /// Puts made before the recording (gone when it attached): a channel created after the
    /// recorder started counts them as missed.
    pub(crate) fn before(&self) -> u64 {
        self.before
    }

    /// The `changed` future to wait on (a channel without a head that looked and found nothing).
    pub(crate) fn changed(&mut self) -> Option<&mut Pin<Box<Changed>>> {
        self.changed.as_mut()
    }

    /// Gets the channel's next item as its head, if it has none and one is present, and only
    /// when `changed` fired since the last look. Returns why the channel ended, when it just did
    /// (reported once).
    pub(crate) fn fill_head(&mut self) -> RecordResult<Option<String>> {
        if self.ended.is_some() {
            return Ok(None);
        }
        if let Some(why) = self.consume_again()? {
            return Ok(Some(why));
        }
        if self.head.is_some() {
            return Ok(None);
        }
        if let Some(changed) = self.changed.as_mut() {
            if changed.as_mut().now_or_never().is_none() {
                return Ok(None); // nothing arrived since the last look
            }
        }
        // Registered before the get: an item arriving after a "not yet" completes it.
        self.changed = Some(Box::pin(self.input.changed(OLDEST_UNSEEN)));
        match self.input.get(OLDEST_UNSEEN, Some(Duration::ZERO)) {
            Ok(item) => {
                self.head = Some(item);
                self.changed = None;
                self.unreachable_since = None;
            }
            Err(Error::NotAvailable { .. }) => self.unreachable_since = None,
            Err(e) => return self.failed(e),
        }
        Ok(None)
    }

    /// Consumes a written item (its claim goes). Returns why the channel ended, if it just did.
    pub(crate) fn consume(&mut self, ts: Timestamp) -> RecordResult<Option<String>> {
        self.unconsumed.push_back(ts);
        self.consume_again()
    }

    /// Consumes the written items whose consume did not reach the node yet, oldest first.
    fn consume_again(&mut self) -> RecordResult<Option<String>> {
        while let Some(&ts) = self.unconsumed.front() {
            match self.input.consume(ts) {
                Ok(()) => {
                    self.unconsumed.pop_front();
                }
                Err(e) => return self.failed(e),
            }
        }
        Ok(None)
    }

    /// A failed get or consume: the channel ends (`Some(why)`), waits for its node (`None`), or
    /// the error is the recorder's own (`Err`).
    fn failed(&mut self, e: Error) -> RecordResult<Option<String>> {
        match e {
            Error::Closed { .. } => {}
            Error::Unreachable { .. } => {
                self.changed = None; // look again next turn
                let since = *self.unreachable_since.get_or_insert_with(Instant::now);
                if since.elapsed() < UNREACHABLE_FOR {
                    return Ok(None);
                }
            }
            e => return Err(e.into()),
        }
        let why = e.to_string();
        self.ended = Some(why.clone());
        self.unconsumed.clear();
        Ok(Some(why))
    }

    /// When the recorder stops: notes the channel's put count, and returns the timestamps it
    /// holds — what the stop still writes (items put later are left). The two are read together
    /// (again while puts keep changing the count) so that the count covers exactly those items;
    /// when puts never pause for [`COUNT_TRIES_MAX`] tries, the count read before the last
    /// snapshot is kept: every item it counts is in that snapshot (or was let go: missed), so
    /// an item put after the snapshot is never counted as missed (it was, under load: a flake of
    /// `stop_returns_while_a_producer_puts_below_what_is_held`).
    pub(crate) fn at_stop(&mut self) -> Vec<Timestamp> {
        if self.ended.is_some() {
            return Vec::new();
        }
        let mut held = Vec::new();
        for _ in 0..COUNT_TRIES_MAX {
            let puts = self.channel.stats().puts;
            held = self.channel.timestamps();
            self.puts_at_stop = Some(puts);
            if self.channel.stats().puts == puts {
                break;
            }
        }
        held
    }

    /// Writes-to-be at stop: the item at `ts` if this connection has not seen it yet (`None`:
    /// consumed already, reclaimed, or gone). Returns why the channel ended, if it just did.
    pub(crate) fn take_at(&mut self, ts: Timestamp) -> RecordResult<Result<Option<Item>, String>> {
        if let Some(head) = self.head.take_if(|head| head.ts == ts) {
            return Ok(Ok(Some(head)));
        }
        if self.ended.is_some() {
            return Ok(Ok(None));
        }
        match self.input.get(Selector::At(ts), Some(Duration::ZERO)) {
            Ok(item) => Ok(Ok(Some(item))),
            Err(Error::AlreadyConsumed { .. } | Error::Reclaimed { .. } | Error::NotAvailable { .. }) => Ok(Ok(None)),
            Err(e) => Ok(match self.failed(e)? {
                Some(why) => Err(why),
                None => Ok(None), // unreachable now: left (counted missed)
            }),
        }
    }

    /// Items put into the channel while recorded that are not in the recording: for a channel
    /// that ended, every put not written (what was left went with it); after a stop, every put
    /// up to the stop not written (items reclaimed early by a reference count, or too large).
    /// An embedded channel always knows its puts; a remote one that is gone reports none.
    pub(crate) fn unrecorded(&self) -> u64 {
        let puts = match (self.ended.is_some(), self.puts_at_stop) {
            (false, Some(puts)) => puts,
            _ => self.channel.stats().puts,
        };
        puts.saturating_sub(self.before + self.written)
    }
}

/// A root task at the current ts_min. ts_min may pass the value read before the task is made;
/// then it is read again.
fn root_task_at_ts_min(rt: &Runtime) -> stampede::Result<Task> {
    let mut last = None;
    for _ in 0..TS_MIN_TRIES_MAX {
        match rt.task(rt.ts_min()) {
            Ok(task) => return Ok(task),
            Err(e @ Error::BelowVisibility { .. }) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.expect("at least one try"))
}

/// The watches on the recorded names: channels created under them are followed too.
pub(crate) struct Watching {
    pub(crate) rt: Runtime,
    pub(crate) watches: Vec<Watch>,
    pub(crate) names: Vec<String>,
    /// Channels whose attach failed `Unreachable`: tried again at the next look.
    pub(crate) retry: Vec<String>,
    /// Names whose watch lagged: listed again at the next look.
    pub(crate) relist: Vec<String>,
}

/// What a look at the names found.
pub(crate) enum Found {
    /// A channel to follow from now on.
    Follow(Box<Followed>),
    /// A channel that went before the recorder could attach: its puts are missed.
    Gone { name: String, puts: u64 },
    /// A channel created and destroyed before the recorder could even look it up: what was put
    /// into it is unknown.
    Vanished,
}

impl Watching {
    /// Attaches to every channel created under the recorded names since the last look (again
    /// to one destroyed and created anew); after a lag, to every one the names list.
    /// `followed(id)` says whether a channel is followed already.
    pub(crate) fn look(&mut self, followed: impl Fn(u64) -> bool) -> RecordResult<Vec<Found>> {
        let mut created = std::mem::take(&mut self.retry);
        for selector in std::mem::take(&mut self.relist) {
            match self.rt.names(&selector) {
                Ok(names) => created.extend(names),
                Err(Error::Unreachable { .. }) => self.relist.push(selector), // next look
                Err(e) => return Err(e.into()),
            }
        }
        let relist = &mut self.relist;
        for (watch, selector) in self.watches.iter_mut().zip(&self.names) {
            loop {
                match watch.next_event(Some(Duration::ZERO)) {
                    Ok(WatchEvent::Created { name, container_kind, .. }) if container_kind == "channel" => {
                        created.push(name)
                    }
                    Ok(WatchEvent::Lagged { .. }) => relist.push(selector.clone()),
                    Ok(_) => {}
                    Err(Error::NotAvailable { .. } | Error::Closed { .. } | Error::Unreachable { .. }) => break,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        let mut found = Vec::new();
        for name in created {
            let channel = match self.rt.lookup(&name) {
                Ok(Container::Channel(channel)) => channel,
                // A queue (a `Lagged` relisting names channels and queues).
                Ok(Container::Queue(_)) => continue,
                Err(Error::NotFound { .. }) => {
                    found.push(Found::Vanished);
                    continue;
                }
                Err(Error::Unreachable { .. }) => {
                    self.retry.push(name);
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            if followed(channel.id()) {
                continue;
            }
            match Followed::attach(&self.rt, &channel) {
                Ok(joined) => found.push(Found::Follow(Box::new(joined))),
                Err(Error::Closed { .. } | Error::NotFound { .. }) => {
                    found.push(Found::Gone { name, puts: channel.stats().puts });
                }
                Err(Error::Unreachable { .. }) => self.retry.push(name),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(found)
    }
}
