//! One run of the C API target: the runtime, the handles its calls made, what was put, and one
//! step per call of `stampede.h` (the module above says what each checks).

use std::collections::HashMap;
use std::ffi::{c_int, CStr};
use std::ptr::{null, null_mut};
use std::sync::atomic::AtomicU64;

use super::*;

pub(super) struct Run {
    rt: *mut stp_runtime,
    pub(super) ts_min: i64,
    tasks: Pool<stp_task>,
    channels: Pool<stp_channel>,
    queues: Pool<stp_queue>,
    inputs: Pool<stp_channel_input>,
    outputs: Pool<stp_channel_output>,
    queue_inputs: Pool<stp_queue_input>,
    queue_outputs: Pool<stp_queue_output>,
    items: Pool<stp_item>,
    watches: Pool<stp_watch>,
    /// The generation of each name created: bumped by each create that succeeds.
    generations: HashMap<String, u32>,
    /// What each channel accepted, by timestamp.
    channel_puts: HashMap<(Of, i64), Stored>,
    /// What each queue accepted.
    queue_puts: HashMap<Of, Vec<(i64, Stored)>>,
    /// What the GC handlers count; boxed, so its address stays put until the runtime is closed.
    reclaimed: Box<AtomicU64>,
}

/// The name and generation of a root or spawned task's handle: tasks are of nothing.
fn no_name() -> Of {
    Of { name: String::new(), generation: 0 }
}

impl Run {
    pub(super) fn new(rt: *mut stp_runtime) -> Run {
        Run {
            rt,
            // SAFETY: `rt` is live.
            ts_min: unsafe { stp_runtime_ts_min(rt) },
            tasks: Pool::new(stp_task_free),
            channels: Pool::new(stp_channel_free),
            queues: Pool::new(stp_queue_free),
            inputs: Pool::new(stp_channel_input_free),
            outputs: Pool::new(stp_channel_output_free),
            queue_inputs: Pool::new(stp_queue_input_free),
            queue_outputs: Pool::new(stp_queue_output_free),
            items: Pool::new(stp_item_release),
            watches: Pool::new(stp_watch_free),
            generations: HashMap::new(),
            channel_puts: HashMap::new(),
            queue_puts: HashMap::new(),
            reclaimed: Box::default(),
        }
    }

    fn of(&self, name: &CStr) -> Of {
        let name = name.to_string_lossy().into_owned();
        let generation = self.generations.get(&name).copied().unwrap_or(0);
        Of { name, generation }
    }

    /// One call, chosen by `tag`.
    ///
    /// # Safety
    /// Every handle of the run is live.
    pub(super) unsafe fn step(&mut self, tag: u8, args: &mut Args) {
        // SAFETY: the same contract, for each.
        unsafe {
            match tag % 14 {
                0 | 1 => self.create(tag % 2 == 1, args),
                2 => self.look_up(args),
                3 => self.task(args),
                4 => self.attach(args),
                5 => self.put(args),
                6 => self.get(args),
                7 => self.get_range(args),
                8 => self.consume(args),
                9 => self.queue(args),
                10 => npy_header(args),
                11 => self.counters(args),
                12 => self.free_one(args),
                _ => self.watch_and_handlers(args),
            }
        }
    }

    /// `stp_runtime_create_channel` or `_queue`.
    unsafe fn create(&mut self, queue: bool, args: &mut Args) {
        let nulls = Nulls(args.byte());
        // A bound on bytes: its sentinels, or a multiple of 64 bytes.
        let (capacity, max_bytes) = (args.bound(), args.bound());
        let max_bytes = if max_bytes > 0 { max_bytes * 64 } else { max_bytes };
        let name = args.text();
        let null_required = nulls.any(2);
        let call = if queue { "stp_runtime_create_queue" } else { "stp_runtime_create_channel" };
        let mut ch = unwritten();
        let mut q = unwritten();
        // SAFETY: `rt` live; the name a C string; the out-parameters valid or NULL.
        let (rt, name_ptr) = (self.rt, nulls.of(0, name.as_ptr()));
        let code = unsafe {
            if queue {
                stp_runtime_create_queue(rt, name_ptr, capacity, max_bytes, nulls.of_mut(1, &mut q))
            } else {
                stp_runtime_create_channel(rt, name_ptr, capacity, max_bytes, nulls.of_mut(1, &mut ch))
            }
        };
        let out = if queue { q.cast() } else { ch.cast::<()>() };
        if made(call, code, null_required, out) {
            *self.generations.entry(name.to_string_lossy().into_owned()).or_default() += 1;
            let of = self.of(&name);
            // SAFETY: just made, owned here.
            unsafe {
                if queue {
                    self.queues.keep(q, of)
                } else {
                    self.channels.keep(ch, of)
                }
            }
        }
    }

    /// `stp_runtime_lookup`, then `stp_runtime_channel` or `_queue` by what it found.
    unsafe fn look_up(&mut self, args: &mut Args) {
        let nulls = Nulls(args.byte());
        let name = args.text();
        let mut kind: c_int = -1;
        // SAFETY: `rt` live; the name a C string; `kind` writable or NULL.
        let code = unsafe { stp_runtime_lookup(self.rt, nulls.of(0, name.as_ptr()), nulls.of_mut(1, &mut kind)) };
        if !checked("stp_runtime_lookup", code, nulls.any(1)) || nulls.any(2) {
            return;
        }
        let of = self.of(&name);
        let (mut ch, mut q) = (unwritten(), unwritten());
        // SAFETY: as above.
        unsafe {
            if kind == STP_KIND_CHANNEL {
                let code = stp_runtime_channel(self.rt, name.as_ptr(), &mut ch);
                if made("stp_runtime_channel", code, false, ch) {
                    self.channels.keep(ch, of);
                }
            } else {
                assert_eq!(kind, STP_KIND_QUEUE, "stp_runtime_lookup found a kind it does not define");
                let code = stp_runtime_queue(self.rt, name.as_ptr(), &mut q);
                if made("stp_runtime_queue", code, false, q) {
                    self.queues.keep(q, of);
                }
            }
        }
    }

    /// A root task, or one of a task's calls: spawn, virtual time, name, close.
    unsafe fn task(&mut self, args: &mut Args) {
        let (verb, vt) = (args.byte(), args.ts());
        let mut task = unwritten();
        let picked = self.tasks.pick(args);
        // SAFETY: `rt` and the picked task live; the out-parameter valid.
        unsafe {
            match (verb % 5, picked) {
                (0, _) | (_, None) => {
                    if made("stp_runtime_task", stp_runtime_task(self.rt, vt, &mut task), false, task) {
                        self.tasks.keep(task, no_name());
                    }
                }
                (1, Some((parent, _))) => {
                    if made("stp_task_spawn", stp_task_spawn(parent, vt, &mut task), false, task) {
                        // A child starts at or above its parent's visibility (not its virtual time).
                        let spawned_vt = stp_task_virtual_time(task);
                        assert!(spawned_vt >= stp_task_visibility(parent), "a child below its parent's visibility");
                        self.tasks.keep(task, no_name());
                    }
                }
                (2, Some((task, _))) => {
                    let before = stp_task_visibility(task);
                    if checked("stp_task_set_virtual_time", stp_task_set_virtual_time(task, vt), false) {
                        assert_eq!(stp_task_virtual_time(task), vt, "the virtual time set is the one read");
                        assert!(stp_task_visibility(task) >= before, "a task's visibility went back");
                    }
                }
                (3, Some((task, _))) => {
                    let name = args.text();
                    let nulls = Nulls(args.byte());
                    let code = stp_task_set_name(task, nulls.of(0, name.as_ptr()));
                    checked("stp_task_set_name", code, nulls.any(1));
                }
                (_, Some((task, _))) => {
                    checked("stp_task_close", stp_task_close(task), false);
                }
            }
        }
    }

    /// A task's attach calls: input (plain, bounded, with a prefetch policy), output, and
    /// a queue's.
    unsafe fn attach(&mut self, args: &mut Args) {
        let (verb, nulls) = (args.byte(), Nulls(args.byte()));
        let Some((task, _)) = self.tasks.pick(args) else { return };
        let task = nulls.of(0, task);
        let null_required = nulls.any(2);
        // SAFETY: the picked handles live; the out-parameters valid or NULL.
        unsafe {
            if verb % 2 == 0 {
                let Some((ch, of)) = self.channels.pick(args) else { return };
                let ch = nulls.of(1, ch);
                let (mut input, mut output) = (unwritten(), unwritten());
                let code = match verb / 2 % 4 {
                    0 => stp_task_attach_input(task, ch, nulls.of_mut(2, &mut input)),
                    1 => {
                        let (items, ts) = (args.bound(), args.bound());
                        stp_task_attach_input_bounded(task, ch, items, ts, nulls.of_mut(2, &mut input))
                    }
                    2 => {
                        let policy = args.text();
                        stp_task_attach_input_prefetch(task, ch, policy.as_ptr(), nulls.of_mut(2, &mut input))
                    }
                    _ => {
                        let code = stp_task_attach_output(task, ch, nulls.of_mut(2, &mut output));
                        if made("stp_task_attach_output", code, null_required, output) {
                            self.outputs.keep(output, of);
                        }
                        return;
                    }
                };
                if made("stp_task_attach_input", code, null_required, input) {
                    self.inputs.keep(input, of);
                }
            } else {
                let Some((q, of)) = self.queues.pick(args) else { return };
                let q = nulls.of(1, q);
                let (mut input, mut output) = (unwritten(), unwritten());
                if verb / 2 % 2 == 0 {
                    let code = stp_task_attach_queue_input(task, q, nulls.of_mut(2, &mut input));
                    if made("stp_task_attach_queue_input", code, null_required, input) {
                        self.queue_inputs.keep(input, of);
                    }
                } else {
                    let code = stp_task_attach_queue_output(task, q, nulls.of_mut(2, &mut output));
                    if made("stp_task_attach_queue_output", code, null_required, output) {
                        self.queue_outputs.keep(output, of);
                    }
                }
            }
        }
    }

    /// `stp_channel_output_put`: what it accepts at a timestamp is never accepted again there.
    unsafe fn put(&mut self, args: &mut Args) {
        let (nulls, ts, refcount, timeout) = (Nulls(args.byte()), args.ts(), args.bound(), args.timeout());
        let Some((output, of)) = self.outputs.pick(args) else { return };
        let codec = args.text();
        let data = args.rest();
        // A NULL codec is "raw"; NULL data is allowed with a length of 0 only.
        let (codec_ptr, data_ptr) = (nulls.of(1, codec.as_ptr()), nulls.of(2, data.as_ptr()));
        let null_required = nulls.any(1) || (data_ptr.is_null() && !data.is_empty());
        // SAFETY: the output live; codec NULL or a C string; data NULL or `len` readable bytes.
        let code = unsafe {
            stp_channel_output_put(nulls.of(0, output), ts, codec_ptr, data_ptr, data.len(), refcount, timeout)
        };
        if checked("stp_channel_output_put", code, null_required) {
            let codec = if codec_ptr.is_null() { "raw".to_owned() } else { codec.to_string_lossy().into_owned() };
            let earlier = self.channel_puts.insert((of.clone(), ts), (codec, data.to_vec()));
            assert!(earlier.is_none(), "channel {} accepted timestamp {ts} twice", of.name);
        }
    }

    /// Checks an item a channel's connection got against what was put there.
    unsafe fn check_channel_item(&self, item: *const stp_item, of: &Of) {
        // SAFETY: the item live.
        let (ts, stored) = unsafe { read(item) };
        let Some(put) = self.channel_puts.get(&(of.clone(), ts)) else {
            panic!("channel {} gave an item at {ts} that nobody put", of.name)
        };
        assert!(put == &stored, "channel {}'s item at {ts} is not what was put", of.name);
    }

    /// `stp_channel_input_get` with any selector kind, a timestamp and a timeout of 0.
    unsafe fn get(&mut self, args: &mut Args) {
        let (nulls, kind, ts, timeout) =
            (Nulls(args.byte()), c_int::from(args.byte() as i8), args.ts(), args.timeout());
        let Some((input, of)) = self.inputs.pick(args) else { return };
        let mut item = unwritten();
        // SAFETY: the input live; the out-parameter valid or NULL.
        let code = unsafe { stp_channel_input_get(nulls.of(0, input), kind, ts, timeout, nulls.of_mut(1, &mut item)) };
        if made("stp_channel_input_get", code, nulls.any(2), item) {
            // SAFETY: the item just made, live until released.
            unsafe {
                if kind == stampede_capi::args::STP_AT {
                    assert_eq!(stp_item_ts(item), ts, "an exact get gave another timestamp");
                }
                self.check_channel_item(item, &of);
                self.items.keep(item, of);
            }
        } else if code == STP_NOT_AVAILABLE {
            let (mut previous, mut next) = (0, 0);
            // SAFETY: writable.
            assert_eq!(unsafe { stp_last_error_neighbours(&mut previous, &mut next) }, 1, "no neighbours told");
        }
    }

    /// `stp_channel_input_get_range`: items in timestamp order, within the range, as put.
    unsafe fn get_range(&mut self, args: &mut Args) {
        let (nulls, t0, t1) = (Nulls(args.byte()), args.ts(), args.ts());
        let Some((input, of)) = self.inputs.pick(args) else { return };
        let mut items = unwritten();
        // SAFETY: the input live; the out-parameter valid or NULL.
        let code = unsafe { stp_channel_input_get_range(nulls.of(0, input), t0, t1, nulls.of_mut(1, &mut items)) };
        if !made("stp_channel_input_get_range", code, nulls.any(2), items) {
            return;
        }
        // SAFETY: the list just made, live until released; its items live with it.
        unsafe {
            let mut last = None;
            for i in 0..stp_items_len(items) {
                let item = stp_items_at(items, i);
                let ts = stp_item_ts(item);
                assert!((t0..=t1).contains(&ts), "get_range({t0}, {t1}) gave an item at {ts}");
                assert!(last < Some(ts), "get_range's items are out of order at {ts}");
                last = Some(ts);
                self.check_channel_item(item, &of);
                if i == 0 {
                    // An item cloned out of its list outlives it.
                    self.items.keep(stp_item_clone(item), of.clone());
                }
            }
            assert!(stp_items_at(items, stp_items_len(items)).is_null(), "an index past the list is NULL");
            stp_items_release(items);
        }
    }

    /// `stp_channel_input_consume` or `_consume_until`, any timestamp.
    unsafe fn consume(&mut self, args: &mut Args) {
        let (nulls, until, ts) = (Nulls(args.byte()), args.byte() % 2 == 1, args.ts());
        let Some((input, _)) = self.inputs.pick(args) else { return };
        let input = nulls.of(0, input);
        // SAFETY: the input live or NULL.
        let code = unsafe {
            if until {
                stp_channel_input_consume_until(input, ts)
            } else {
                stp_channel_input_consume(input, ts)
            }
        };
        checked("stp_channel_input_consume", code, nulls.any(1));
    }

    /// A queue's put, get, consume (by item or by timestamp).
    unsafe fn queue(&mut self, args: &mut Args) {
        let (verb, nulls, ts, timeout) = (args.byte(), Nulls(args.byte()), args.ts(), args.timeout());
        // SAFETY: the picked handles live; the pointers valid or NULL.
        unsafe {
            match verb % 4 {
                0 => {
                    let Some((output, of)) = self.queue_outputs.pick(args) else { return };
                    let codec = args.text();
                    let data = args.rest();
                    let code = stp_queue_output_put(
                        nulls.of(0, output),
                        ts,
                        codec.as_ptr(),
                        data.as_ptr(),
                        data.len(),
                        timeout,
                    );
                    if checked("stp_queue_output_put", code, nulls.any(1)) {
                        let stored = (codec.to_string_lossy().into_owned(), data.to_vec());
                        self.queue_puts.entry(of).or_default().push((ts, stored));
                    }
                }
                1 => {
                    let Some((input, of)) = self.queue_inputs.pick(args) else { return };
                    let mut item = unwritten();
                    let code = stp_queue_input_get(nulls.of(0, input), timeout, nulls.of_mut(1, &mut item));
                    if made("stp_queue_input_get", code, nulls.any(2), item) {
                        let (ts, stored) = read(item);
                        let puts = self.queue_puts.get(&of).map(Vec::as_slice).unwrap_or_default();
                        assert!(puts.contains(&(ts, stored)), "queue {} gave an item nobody put", of.name);
                        self.items.keep(item, of);
                    }
                }
                2 => {
                    let Some((input, _)) = self.queue_inputs.pick(args) else { return };
                    let Some((item, _)) = self.items.pick(args) else { return };
                    let code = stp_queue_input_consume(nulls.of(0, input), nulls.of(1, item));
                    checked("stp_queue_input_consume", code, nulls.any(2));
                }
                _ => {
                    let Some((input, _)) = self.queue_inputs.pick(args) else { return };
                    checked(
                        "stp_queue_input_consume_ts",
                        stp_queue_input_consume_ts(nulls.of(0, input), ts),
                        nulls.any(1),
                    );
                }
            }
        }
    }

    /// Counters: stats of a channel and a queue, an output's demand, a collection.
    unsafe fn counters(&mut self, args: &mut Args) {
        let nulls = Nulls(args.byte());
        let mut stats = stp_stats::default();
        // SAFETY: the picked handles live; `stats` writable or NULL.
        unsafe {
            if let Some((ch, _)) = self.channels.pick(args) {
                let code = stp_channel_stats(nulls.of(0, ch), nulls.of_mut(1, &mut stats));
                if checked("stp_channel_stats", code, nulls.any(2)) {
                    assert!(stats.ts_min >= self.ts_min, "stats gave a ts_min that went back");
                }
            }
            if let Some((q, _)) = self.queues.pick(args) {
                checked(
                    "stp_queue_stats",
                    stp_queue_stats(nulls.of(2, q), nulls.of_mut(3, &mut stats)),
                    nulls.0 & 12 != 0,
                );
            }
            if let Some((output, _)) = self.outputs.pick(args) {
                assert!(stp_channel_output_demand(output) >= -1, "a demand below -1");
            }
            let mut reclaimed = 0;
            checked("stp_runtime_collect", stp_runtime_collect(self.rt, nulls.of_mut(4, &mut reclaimed)), false);
        }
    }

    /// Frees, releases, detaches or destroys one handle.
    unsafe fn free_one(&mut self, args: &mut Args) {
        let verb = args.byte();
        // SAFETY: every handle of the run live; each freed once.
        unsafe {
            match verb % 12 {
                0 => self.tasks.free_one(args),
                1 => self.channels.free_one(args),
                2 => self.queues.free_one(args),
                3 => self.inputs.free_one(args),
                4 => self.outputs.free_one(args),
                5 => self.queue_inputs.free_one(args),
                6 => self.queue_outputs.free_one(args),
                7 => self.items.free_one(args),
                8 => self.watches.free_one(args),
                9 => {
                    if let Some((ch, _)) = self.channels.pick(args) {
                        checked("stp_channel_destroy", stp_channel_destroy(ch), false);
                    }
                    if let Some((q, _)) = self.queues.pick(args) {
                        checked("stp_queue_destroy", stp_queue_destroy(q), false);
                    }
                }
                10 => {
                    if let Some((input, _)) = self.inputs.pick(args) {
                        checked("stp_channel_input_detach", stp_channel_input_detach(input), false);
                    }
                    if let Some((output, _)) = self.outputs.pick(args) {
                        checked("stp_channel_output_detach", stp_channel_output_detach(output), false);
                    }
                }
                _ => {
                    if let Some((input, _)) = self.queue_inputs.pick(args) {
                        checked("stp_queue_input_detach", stp_queue_input_detach(input), false);
                    }
                    if let Some((output, _)) = self.queue_outputs.pick(args) {
                        checked("stp_queue_output_detach", stp_queue_output_detach(output), false);
                    }
                }
            }
        }
    }

    /// A watch and its next event (never waiting), names under a prefix, GC handlers, and the
    /// error helpers with any code.
    unsafe fn watch_and_handlers(&mut self, args: &mut Args) {
        let (verb, nulls, code) = (args.byte(), Nulls(args.byte()), c_int::from(args.byte() as i8));
        let prefix = args.text();
        let user = std::ptr::from_ref::<AtomicU64>(&self.reclaimed).cast_mut().cast();
        // SAFETY: the handles live; the strings C strings; `user` alive until the runtime closes.
        unsafe {
            match verb % 4 {
                0 => {
                    let mut watch = unwritten();
                    let code = stp_runtime_watch(self.rt, nulls.of(0, prefix.as_ptr()), nulls.of_mut(1, &mut watch));
                    if made("stp_runtime_watch", code, nulls.any(2), watch) {
                        self.watches.keep(watch, no_name());
                    }
                }
                1 => {
                    let Some((watch, _)) = self.watches.pick(args) else { return };
                    let mut event =
                        stp_watch_event { kind: null(), name: null(), container_kind: 0, node: null(), missed: 0 };
                    if checked("stp_watch_next", stp_watch_next(watch, 0, nulls.of_mut(0, &mut event)), nulls.any(1)) {
                        assert!(CStr::from_ptr(event.kind).to_str().is_ok(), "an event's kind is not UTF-8");
                        let name = (!event.name.is_null()).then(|| CStr::from_ptr(event.name));
                        assert!(name.is_none_or(|n| n.to_str().is_ok()), "an event's name is not UTF-8");
                    }
                }
                2 => {
                    let mut names = unwritten();
                    let code = stp_runtime_names(self.rt, nulls.of(0, prefix.as_ptr()), nulls.of_mut(1, &mut names));
                    if made("stp_runtime_names", code, nulls.any(2), names) {
                        for i in 0..stp_names_len(names) {
                            let name = CStr::from_ptr(stp_names_at(names, i)).to_bytes();
                            assert!(name.starts_with(prefix.to_bytes()), "a name outside the prefix");
                        }
                        stp_names_free(names);
                    }
                }
                _ => {
                    assert!(!stp_error_name(code).is_null(), "stp_error_name({code}) is NULL");
                    let Some((ch, _)) = self.channels.pick(args) else { return };
                    checked("stp_channel_on_reclaim", stp_channel_on_reclaim(ch, Some(counted), user), false);
                    if let Some((q, _)) = self.queues.pick(args) {
                        checked("stp_queue_on_reclaim", stp_queue_on_reclaim(q, Some(counted), user), false);
                    }
                    let handler: stp_runtime_reclaim_fn = (!nulls.any(1)).then_some(counted_by_name);
                    checked(
                        "stp_runtime_on_reclaim",
                        stp_runtime_on_reclaim(self.rt, handler, user),
                        handler.is_none(),
                    );
                }
            }
        }
    }

    /// Frees every handle left and the runtime (first when `runtime_first`, else last).
    ///
    /// # Safety
    /// Every handle of the run is live.
    pub(super) unsafe fn free_all(mut self, runtime_first: bool) {
        // SAFETY: every handle live, each freed once; the runtime is closed before its handlers'
        // counter is dropped.
        unsafe {
            if runtime_first {
                checked("stp_runtime_close", stp_runtime_close(self.rt), false);
                stp_runtime_free(std::mem::replace(&mut self.rt, null_mut()));
            }
            self.items.free_all();
            self.watches.free_all();
            self.inputs.free_all();
            self.outputs.free_all();
            self.queue_inputs.free_all();
            self.queue_outputs.free_all();
            self.channels.free_all();
            self.queues.free_all();
            self.tasks.free_all();
            if !runtime_first {
                checked("stp_runtime_close", stp_runtime_close(self.rt), false);
                stp_runtime_free(self.rt);
            }
        }
    }
}
