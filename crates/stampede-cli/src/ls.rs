//! `stampede ls [prefix] --connect <endpoint>`: the names of the channels and queues on a node.

use stampede::{connect_with, ConnectOptions};
use std::io::Write;

/// Connects, lists, prints one name per line, closes.
pub fn run(prefix: &str, endpoint: &str, options: &ConnectOptions) -> Result<(), Box<dyn std::error::Error>> {
    let rt = connect_with(endpoint, options)?;
    let names = rt.names(prefix);
    rt.close();
    let mut out = std::io::stdout().lock();
    for name in names? {
        writeln!(out, "{name}")?;
    }
    out.flush()?;
    Ok(())
}
