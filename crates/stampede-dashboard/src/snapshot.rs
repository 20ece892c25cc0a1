//! The snapshot: what the page shows, as JSON (`GET /api/snapshot`, and each WebSocket text
//! message). Built from [`Graph`] plus what only the dashboard knows: rates between successive
//! graphs, fill ratios of bounded channels, the image's state. The format is documented in
//! `docs/DASHBOARD.md`; fields are only ever added.
//!
//! Timestamps are JSON integers, except `INFINITY` which is the string `"INFINITY"` (JavaScript
//! numbers cannot hold `i64::MAX`). Rates are per second over the time between two graphs at
//! least [`RATE_WINDOW_MIN`] (or the refresh period, if longer) apart, so that asking often (a
//! test, a curl loop) does not make them noisy; they are rounded to 0.001.

use std::collections::HashMap;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Serialize, Serializer};
use stampede::{BudgetUse, ConnectionKind, Graph, Timestamp, INFINITY};

use crate::ROWS_MAX;
use stampede_view::image::OverlayBox;

/// Shortest time over which a rate is computed: at 30 fps, one frame more or less in the window
/// moves the rate by 3%.
pub(crate) const RATE_WINDOW_MIN: std::time::Duration = std::time::Duration::from_secs(1);

/// Version of the snapshot format.
pub(crate) const FORMAT_VERSION: u32 = 1;

/// A timestamp as JSON: an integer, or `"INFINITY"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ts(pub Timestamp);

impl Serialize for Ts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.0 == INFINITY {
            serializer.serialize_str("INFINITY")
        } else {
            serializer.serialize_i64(self.0)
        }
    }
}

#[derive(Serialize)]
pub(crate) struct Snapshot {
    pub version: u32,
    /// The node shown (`null`: an embedded runtime that does not serve).
    pub node: Option<String>,
    pub ts_min: Ts,
    /// What holds ts_min where it is, in words (`Graph::describe`); empty when nothing does.
    pub held_by: Vec<String>,
    /// Wall-clock time of the snapshot, milliseconds since the Unix epoch.
    pub time_ms: u64,
    pub refresh_ms: u64,
    /// WebSocket clients connected now.
    pub clients: usize,
    /// Why the graph could not be read (e.g. the node is unreachable), if it could not.
    pub error: Option<String>,
    /// `true` if tasks or channels were cut at [`ROWS_MAX`].
    pub truncated: bool,
    pub tasks: Vec<TaskRow>,
    pub channels: Vec<ChannelRow>,
    /// `null` when no image channel is configured.
    pub image: Option<ImageState>,
    /// Through a node: its byte budget's use and this session's (`null` embedded).
    pub budget: Option<BudgetUse>,
}

#[derive(Serialize)]
pub(crate) struct TaskRow {
    pub id: u64,
    pub name: Option<String>,
    /// `true` for the dashboard's own task.
    pub dashboard: bool,
    pub virtual_time: Ts,
    pub visibility: Ts,
    /// Items per second through its busiest output connection, else its busiest input.
    pub fps: f64,
    pub connections: Vec<ConnectionRow>,
}

#[derive(Serialize)]
pub(crate) struct ConnectionRow {
    pub id: u64,
    pub container: String,
    /// `"input"` or `"output"`.
    pub kind: &'static str,
    /// Items gotten (input) or put (output) through it so far, and per second.
    pub items: u64,
    pub items_per_s: f64,
    /// Input only: items it let go without getting them (a `NEWEST_UNSEEN` reader's skipped
    /// frames), and per second.
    pub skipped: u64,
    pub skipped_per_s: f64,
    /// A remote input connection's pattern, as its tape on the node shows it (`skipping`, `in
    /// order`, …; docs/NODES.md, "Tapes"); `None` elsewhere.
    pub pattern: Option<String>,
    /// A remote input connection's prefetch: its policy, and the share of the items pushed to it
    /// that its gets used (`prefetch off` or `prefetch newest, 57/59 pushes used`;
    /// docs/PREFETCH.md); `None` elsewhere.
    pub prefetch: Option<String>,
}

#[derive(Serialize)]
pub(crate) struct ChannelRow {
    pub name: String,
    /// `"channel"` or `"queue"`.
    pub kind: String,
    pub codec: Option<String>,
    pub description: String,
    pub capacity: Option<u64>,
    pub max_bytes: Option<u64>,
    pub live_items: u64,
    pub live_bytes: u64,
    pub puts: u64,
    pub gets: u64,
    pub reclaimed: u64,
    /// Puts that ended `Full` (not stored): its producers' drops.
    pub dropped: u64,
    /// Its lowest claim on ts_min, if any.
    pub claim: Option<Ts>,
    /// Input and output connections attached now (from the tasks' connections).
    pub inputs: usize,
    pub outputs: usize,
    /// Items skipped by its input connections so far (sum over the connections attached now).
    pub skipped: u64,
    /// `live_items / capacity` and `live_bytes / max_bytes` (`null`: unbounded).
    pub fill_items: Option<f64>,
    pub fill_bytes: Option<f64>,
    pub puts_per_s: f64,
    pub gets_per_s: f64,
    pub reclaimed_per_s: f64,
    /// Estimated: puts per second × the mean size of the items live now.
    pub bytes_per_s: f64,
}

/// The image as the sampler last saw it.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct ImageState {
    pub channel: String,
    /// `"waiting"` (no frame yet, or the channel does not exist yet), `"ok"` or `"error"`.
    pub status: &'static str,
    /// What is wrong, or what is awaited.
    pub message: Option<String>,
    /// The frame shown: its timestamp, size, and how many frames were shown so far.
    pub ts: Option<Ts>,
    pub width: usize,
    pub height: usize,
    pub channels: usize,
    pub frames: u64,
    pub overlays: Vec<OverlayState>,
}

/// One overlay channel's boxes for the frame shown.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct OverlayState {
    pub channel: String,
    /// The overlay item drawn (`null`: none yet) and whether it is the frame's own timestamp.
    pub ts: Option<Ts>,
    pub exact: bool,
    pub boxes: Vec<OverlayBox>,
    /// Boxes beyond [`BOXES_MAX`](crate::BOXES_MAX), not drawn.
    pub dropped: usize,
    pub message: Option<String>,
}

/// What a rate is of.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Counter {
    Puts(String),
    Gets(String),
    Reclaimed(String),
    Items { task: u64, connection: u64 },
    Skipped { task: u64, connection: u64 },
}

/// Rates per second from successive counter readings.
pub(crate) struct Rates {
    /// Readings closer than this to the baseline reuse the last rates.
    window_min: std::time::Duration,
    baseline: Option<(Instant, HashMap<Counter, u64>)>,
    current: HashMap<Counter, f64>,
}

impl Rates {
    pub(crate) fn new(window_min: std::time::Duration) -> Rates {
        Rates { window_min, baseline: None, current: HashMap::new() }
    }

    /// Takes a reading at `now`; rates move only if the baseline is at least `window_min` old.
    fn observe(&mut self, now: Instant, counters: HashMap<Counter, u64>) {
        let Some((then, old)) = &self.baseline else {
            self.baseline = Some((now, counters));
            return;
        };
        let elapsed_s = now.saturating_duration_since(*then).as_secs_f64();
        if elapsed_s < self.window_min.as_secs_f64() {
            return;
        }
        self.current = counters
            .iter()
            .filter_map(|(counter, value)| {
                let before = old.get(counter)?;
                // A counter that went down belongs to a container created again: no rate yet.
                let delta = value.checked_sub(*before)?;
                Some((counter.clone(), (delta as f64 / elapsed_s * 1000.0).round() / 1000.0))
            })
            .collect();
        self.baseline = Some((now, counters));
    }

    fn rate(&self, counter: &Counter) -> f64 {
        self.current.get(counter).copied().unwrap_or(0.0)
    }
}

/// The snapshot of `graph` (or of the error reading it), updating `rates`.
pub(crate) fn build(graph: Result<Graph, String>, rates: &mut Rates, context: Context) -> Snapshot {
    let (graph, error) = match graph {
        Ok(graph) => (graph, None),
        Err(e) => (Graph::default(), Some(e)),
    };
    rates.observe(Instant::now(), counters(&graph));
    let truncated = graph.tasks.len() > ROWS_MAX || graph.containers.len() > ROWS_MAX;
    let tasks = graph.tasks.iter().take(ROWS_MAX).map(|task| task_row(task, rates, context.task_id)).collect();
    let channels = graph.containers.iter().take(ROWS_MAX).map(|c| channel_row(c, &graph, rates)).collect();
    let held_by = graph.held_by.iter().map(|holder| graph.describe(holder)).collect();
    Snapshot {
        version: FORMAT_VERSION,
        node: graph.node,
        ts_min: Ts(if error.is_some() { context.ts_min } else { graph.ts_min }),
        held_by,
        time_ms: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
        refresh_ms: context.refresh_ms,
        clients: context.clients,
        error,
        truncated,
        tasks,
        channels,
        image: context.image,
        budget: context.budget,
    }
}

/// What the snapshot needs besides the graph.
pub(crate) struct Context {
    /// The dashboard's own task, if it has one.
    pub task_id: Option<u64>,
    /// ts_min to show when the graph cannot be read.
    pub ts_min: Timestamp,
    pub refresh_ms: u64,
    pub clients: usize,
    pub image: Option<ImageState>,
    pub budget: Option<BudgetUse>,
}

fn counters(graph: &Graph) -> HashMap<Counter, u64> {
    let mut counters = HashMap::new();
    for c in &graph.containers {
        counters.insert(Counter::Puts(c.name.clone()), c.puts);
        counters.insert(Counter::Gets(c.name.clone()), c.gets);
        counters.insert(Counter::Reclaimed(c.name.clone()), c.reclaimed);
    }
    for task in &graph.tasks {
        for connection in &task.connections {
            let (task, connection_id) = (task.id, connection.id);
            counters.insert(Counter::Items { task, connection: connection_id }, connection.items);
            counters.insert(Counter::Skipped { task, connection: connection_id }, connection.skipped);
        }
    }
    counters
}

fn task_row(task: &stampede::TaskView, rates: &Rates, dashboard_task: Option<u64>) -> TaskRow {
    let connections: Vec<ConnectionRow> = task
        .connections
        .iter()
        .map(|c| ConnectionRow {
            id: c.id,
            container: c.container.clone(),
            kind: match c.kind {
                ConnectionKind::Input => "input",
                ConnectionKind::Output => "output",
            },
            items: c.items,
            items_per_s: rates.rate(&Counter::Items { task: task.id, connection: c.id }),
            skipped: c.skipped,
            skipped_per_s: rates.rate(&Counter::Skipped { task: task.id, connection: c.id }),
            pattern: c.tape.as_ref().map(|tape| tape.pattern().to_string()),
            prefetch: c.prefetch.map(|p| match p.policy {
                stampede::Prefetch::Off => "prefetch off".to_owned(),
                policy => format!("prefetch {policy}, {}/{} pushes used", p.used, p.pushed),
            }),
        })
        .collect();
    let busiest = |kind: &str| {
        connections
            .iter()
            .filter(|c| c.kind == kind)
            .map(|c| c.items_per_s)
            .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))))
    };
    let fps = busiest("output").or_else(|| busiest("input")).unwrap_or(0.0);
    TaskRow {
        id: task.id,
        name: task.name.clone(),
        dashboard: dashboard_task == Some(task.id),
        virtual_time: Ts(task.virtual_time),
        visibility: Ts(task.visibility),
        fps,
        connections,
    }
}

fn channel_row(c: &stampede::ContainerView, graph: &Graph, rates: &Rates) -> ChannelRow {
    let attached = graph.tasks.iter().flat_map(|t| &t.connections).filter(|k| k.container == c.name);
    let (mut inputs, mut outputs, mut skipped) = (0, 0, 0);
    for connection in attached {
        match connection.kind {
            ConnectionKind::Input => {
                inputs += 1;
                skipped += connection.skipped;
            }
            ConnectionKind::Output => outputs += 1,
        }
    }
    let ratio = |live: u64, bound: Option<u64>| bound.map(|b| if b == 0 { 1.0 } else { live as f64 / b as f64 });
    let puts_per_s = rates.rate(&Counter::Puts(c.name.clone()));
    let mean_item_bytes = if c.live_items == 0 { 0.0 } else { c.live_bytes as f64 / c.live_items as f64 };
    ChannelRow {
        name: c.name.clone(),
        kind: c.kind.clone(),
        codec: c.codec.clone(),
        description: c.description.clone(),
        capacity: c.capacity,
        max_bytes: c.max_bytes,
        live_items: c.live_items,
        live_bytes: c.live_bytes,
        puts: c.puts,
        gets: c.gets,
        reclaimed: c.reclaimed,
        dropped: c.dropped,
        claim: c.claim.map(Ts),
        inputs,
        outputs,
        skipped,
        fill_items: ratio(c.live_items, c.capacity),
        fill_bytes: ratio(c.live_bytes, c.max_bytes),
        puts_per_s,
        gets_per_s: rates.rate(&Counter::Gets(c.name.clone())),
        reclaimed_per_s: rates.rate(&Counter::Reclaimed(c.name.clone())),
        bytes_per_s: puts_per_s * mean_item_bytes,
    }
}
