//! `stampede ls [prefix] [--ts-min] --connect <endpoint>`: the names of the channels and queues
//! on a node; with `--ts-min`, what holds the node's ts_min where it is (the node's graph,
//! `Graph::held_by`): the first question when reclamation stalls.

use stampede::graph::Graph;
use stampede::{connect_with, ConnectOptions};
use std::io::Write;

/// Connects, lists, prints one name per line (then the holders of ts_min if asked), closes.
pub fn run(
    prefix: &str,
    ts_min: bool,
    endpoint: &str,
    options: &ConnectOptions,
) -> Result<(), Box<dyn std::error::Error>> {
    let rt = connect_with(endpoint, options)?;
    let names = rt.names(prefix);
    let graph = if ts_min { Some(rt.graph()) } else { None };
    rt.close();
    let mut out = std::io::stdout().lock();
    for name in names? {
        writeln!(out, "{name}")?;
    }
    if let Some(graph) = graph {
        for line in holders(&graph?) {
            writeln!(out, "{line}")?;
        }
    }
    out.flush()?;
    Ok(())
}

/// `ts_min <n>`, then one line per claim at it (`held by task 3 "tracker" (session 9f2c…)`,
/// `Graph::describe`), or that nothing holds it.
fn holders(graph: &Graph) -> Vec<String> {
    let mut lines = vec![format!("ts_min {}", graph.ts_min)];
    if graph.held_by.is_empty() {
        lines.push("held by nothing: ts_min is past the highest timestamp put".into());
    }
    lines.extend(graph.held_by.iter().map(|holder| format!("held by {}", graph.describe(holder))));
    lines
}
