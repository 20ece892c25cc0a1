//! `stampede info <name>`: what a channel or queue on a node is and who uses it — its kind and
//! node, bounds, codec and description, live items and bytes, puts, gets, reclaimed and dropped,
//! its claim on ts_min, and its producers and consumers (tasks with their virtual time and
//! visibility, and what each connection carried), and a channel's rate, jitter and bandwidth from
//! its put log (see [`crate::hz`]). Read from the node's graph and the log: nothing attaches, so
//! GC is never held back.

use std::io::Write;

use stampede::graph::Graph;
use stampede::{connect_with, ConnectOptions, ConnectionKind, INFINITY};

/// Prints what `name` is on the node at `endpoint`; an error naming it when there is none.
pub fn run(name: &str, endpoint: &str, options: &ConnectOptions) -> Result<(), Box<dyn std::error::Error>> {
    let rt = connect_with(endpoint, options)?;
    let graph = rt.graph();
    // A channel's rate from its put log (turned on by the first ask: said so when it was off).
    let rate = rt.channel(name).and_then(|channel| channel.put_log()).ok().map(|log| match log.len() {
        0 | 1 => format!("put log: off until now (`stampede hz {name}` follows it)"),
        _ => format!("put log: {}", crate::hz::line(&log[log.len().saturating_sub(crate::hz::WINDOW_DEFAULT)..])),
    });
    rt.close();
    let mut lines =
        describe(&graph?, name).ok_or_else(|| format!("no channel or queue named {name:?} on {endpoint}"))?;
    lines.splice(3..3, rate);
    let mut out = std::io::stdout().lock();
    for line in lines {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}

/// The lines `stampede info` prints for `name` in `graph` (`None`: no such channel or queue).
fn describe(graph: &Graph, name: &str) -> Option<Vec<String>> {
    let container = graph.containers.iter().find(|c| c.name == name)?;
    let bound = |bound: Option<u64>| bound.map_or("unbounded".to_owned(), |b| b.to_string());
    let mut lines = vec![
        match &graph.node {
            Some(node) => format!("{name}: {} on node {node}", container.kind),
            None => format!("{name}: {}", container.kind),
        },
        format!(
            "bounds: capacity {}, max_bytes {}; codec {}; description {:?}",
            bound(container.capacity),
            bound(container.max_bytes),
            container.codec.as_deref().unwrap_or("any"),
            container.description
        ),
        format!(
            "live: {} items, {} bytes; puts {}, gets {}, reclaimed {}, dropped {}",
            container.live_items,
            container.live_bytes,
            container.puts,
            container.gets,
            container.reclaimed,
            container.dropped
        ),
        match container.claim {
            Some(claim) if claim == graph.ts_min => format!("claim on ts_min: {claim} (it holds ts_min)"),
            Some(claim) => format!("claim on ts_min: {claim} (ts_min {})", time(graph.ts_min)),
            None => format!("claim on ts_min: none (ts_min {})", time(graph.ts_min)),
        },
    ];
    for task in &graph.tasks {
        for connection in task.connections.iter().filter(|c| c.container == name) {
            let (role, carried) = match connection.kind {
                ConnectionKind::Output => ("producer", format!("put {}", connection.items)),
                ConnectionKind::Input => {
                    let mut carried = format!("got {}, skipped {}", connection.items, connection.skipped);
                    if let Some(tape) = &connection.tape {
                        carried += &format!(
                            ", reads {} over {} gets ({} found nothing)",
                            tape.pattern(),
                            tape.gets,
                            tape.misses
                        );
                    }
                    if let Some(pushes) = connection.prefetch.filter(|p| p.pushed > 0) {
                        carried += &format!(
                            ", prefetch {}: {} of {} pushed items used",
                            pushes.policy, pushes.used, pushes.pushed
                        );
                    }
                    ("consumer", carried)
                }
            };
            lines.push(format!(
                "{role}: {}: virtual time {}, visibility {}; {carried}",
                graph.describe(&stampede::graph::Holder::Task { id: task.id }),
                time(task.virtual_time),
                time(task.visibility)
            ));
        }
    }
    Some(lines)
}

/// A timestamp as the CLI prints it (`INFINITY` by name).
fn time(ts: i64) -> String {
    if ts == INFINITY {
        "INFINITY".into()
    } else {
        ts.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampede::graph::{ConnectionView, ContainerView, TaskView};

    #[test]
    fn a_channel_its_producer_and_its_consumer() {
        let connection = |id, kind, items| ConnectionView {
            id,
            container: "cam".into(),
            kind,
            items,
            skipped: 0,
            tape: None,
            prefetch: None,
        };
        let task = |id: u64, name: &str, virtual_time, connections| TaskView {
            id,
            name: Some(name.into()),
            session: None,
            virtual_time,
            visibility: virtual_time.min(7),
            connections,
        };
        let graph = Graph {
            node: Some("a".into()),
            ts_min: 7,
            tasks: vec![
                task(1, "camera", 9, vec![connection(2, ConnectionKind::Output, 9)]),
                task(3, "tracker", INFINITY, vec![connection(4, ConnectionKind::Input, 8)]),
            ],
            containers: vec![ContainerView {
                name: "cam".into(),
                kind: "channel".into(),
                capacity: Some(8),
                max_bytes: None,
                codec: Some("npy".into()),
                description: "left camera".into(),
                live_items: 2,
                live_bytes: 20,
                puts: 9,
                gets: 8,
                reclaimed: 7,
                dropped: 0,
                claim: Some(7),
            }],
            held_by: Vec::new(),
        };
        let lines = describe(&graph, "cam").expect("the channel is there");
        assert_eq!(lines[0], "cam: channel on node a");
        assert_eq!(lines[1], "bounds: capacity 8, max_bytes unbounded; codec npy; description \"left camera\"");
        assert_eq!(lines[2], "live: 2 items, 20 bytes; puts 9, gets 8, reclaimed 7, dropped 0");
        assert_eq!(lines[3], "claim on ts_min: 7 (it holds ts_min)");
        assert!(
            lines[4].starts_with("producer: task 1 \"camera\"")
                && lines[4].ends_with("virtual time 9, visibility 7; put 9")
        );
        assert!(lines[5].starts_with("consumer: task 3 \"tracker\"") && lines[5].ends_with("; got 8, skipped 0"));
        assert!(lines[5].contains("virtual time INFINITY"));
        assert_eq!(describe(&graph, "nothing"), None);
    }
}
