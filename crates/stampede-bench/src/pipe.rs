//! The two-task shape most benchmarks start from: a digitizer-style producer whose virtual time
//! follows the timestamps it puts, and a tracker-style consumer at virtual time `INFINITY`.

use stampede::{Channel, ChannelInput, ChannelOutput, Limits, Result, Runtime, Task, Timestamp, INFINITY};

/// A runtime with one channel, a producer task and a consumer task attached to it.
pub struct Pipe {
    pub runtime: Runtime,
    pub channel: Channel,
    /// Virtual time 0; advance it past each put (`set_virtual_time(ts + 1)`) so GC can run.
    pub producer: Task,
    pub out: ChannelOutput,
    /// Virtual time `INFINITY`: its visibility is whatever it holds open.
    pub consumer: Task,
    pub inp: ChannelInput,
}

impl Pipe {
    /// A fresh runtime with channel `name` bounded by `limits`.
    pub fn new(name: &str, limits: Limits) -> Result<Pipe> {
        Pipe::on(Runtime::new(), name, limits)
    }

    /// The same on `runtime` (one linked to a mesh, say).
    pub fn on(runtime: Runtime, name: &str, limits: Limits) -> Result<Pipe> {
        let channel = runtime.create_channel(name, limits)?;
        let producer = runtime.task(0)?;
        let out = producer.attach_output(&channel)?;
        let consumer = runtime.task(INFINITY)?;
        let inp = consumer.attach_input(&channel)?;
        Ok(Pipe { runtime, channel, producer, out, consumer, inp })
    }

    /// A producer-only runtime (no input connection): items are reclaimed as soon as the
    /// producer's virtual time passes them.
    pub fn producer_only(name: &str, limits: Limits) -> Result<(Runtime, Channel, Task, ChannelOutput)> {
        let runtime = Runtime::new();
        let channel = runtime.create_channel(name, limits)?;
        let producer = runtime.task(0)?;
        let out = producer.attach_output(&channel)?;
        Ok((runtime, channel, producer, out))
    }
}

/// Checks that everything the benchmark put was reclaimed by the end, so the figures include
/// the GC work they claim to include.
pub fn check_reclaimed(channel: &Channel, puts: u64, live_items_max: usize) {
    let stats = channel.stats();
    assert_eq!(stats.puts, puts, "channel {:?}: puts", channel.name());
    assert!(
        stats.live_items <= live_items_max,
        "channel {:?}: {} items still live after the run (ts_min {}); GC did not keep up",
        channel.name(),
        stats.live_items,
        stats.ts_min
    );
}

/// `ts` as an index into per-item buffers.
pub fn ts_of(i: usize) -> Timestamp {
    Timestamp::try_from(i).expect("iteration count fits in a timestamp")
}
