//! `stampede ls [prefix] --connect <endpoint>`: the names of the channels and queues on a node.

use std::io::Write;
use std::time::Duration;

use stampede::connect;

/// Connects, lists, prints one name per line, closes.
pub fn run(prefix: &str, endpoint: &str, timeout: Duration) -> Result<(), Box<dyn std::error::Error>> {
    let rt = connect(endpoint, Some(timeout))?;
    let names = rt.names(prefix);
    rt.close();
    let mut out = std::io::stdout().lock();
    for name in names? {
        writeln!(out, "{name}")?;
    }
    out.flush()?;
    Ok(())
}
