//! The node's byte budgets (docs/LIMITS.md, "Byte budgets"): how many live payload bytes its
//! sessions' puts may hold, all together (`max_live_bytes`) and each (`max_session_live_bytes`),
//! sized from the machine when not given — half of the lower of its memory and its cgroup's limit
//! for the node, a quarter of the node's for a session.

use std::sync::Arc;

use stampede_core::{Error, Result};
use stampede_engine::budget::{NodeBudget, BUDGET_BYTES_MIN};

use crate::NodeOptions;

/// The node-wide budget when the machine's memory cannot be read (no `/proc/meminfo`).
pub const MAX_LIVE_BYTES_FALLBACK: u64 = 1 << 30;

/// The node's budgets: the node-wide one, and the size of each session's.
pub(crate) struct Budgets {
    pub(crate) node: Arc<NodeBudget>,
    pub(crate) session_bytes: u64,
}

impl Budgets {
    /// The budgets `options` ask for, or their defaults; `InvalidArgument` naming the option for
    /// one below [`BUDGET_BYTES_MIN`] or a session's above the node's.
    pub(crate) fn of(options: &NodeOptions) -> Result<Budgets> {
        let refuse = |reason: String| Err(Error::InvalidArgument { op: "serve", name: options.name.clone(), reason });
        let node_bytes = options.max_live_bytes.unwrap_or_else(default_max_live_bytes);
        let session_bytes = options.max_session_live_bytes.unwrap_or((node_bytes / 4).max(BUDGET_BYTES_MIN));
        for (flag, bytes) in [("--max-live-bytes", node_bytes), ("--max-session-live-bytes", session_bytes)] {
            if bytes < BUDGET_BYTES_MIN {
                return refuse(format!("{flag} {bytes} is below BUDGET_BYTES_MIN ({BUDGET_BYTES_MIN} bytes)"));
            }
        }
        if session_bytes > node_bytes {
            return refuse(format!(
                "--max-session-live-bytes {session_bytes} is above --max-live-bytes {node_bytes}: a session's budget \
                 is a share of the node's"
            ));
        }
        Ok(Budgets { node: NodeBudget::new(node_bytes)?, session_bytes })
    }
}

/// Half of the lower of the machine's memory and the cgroup's memory limit.
fn default_max_live_bytes() -> u64 {
    let memory = [mem_total(), cgroup_limit()].into_iter().flatten().min();
    memory.map_or(MAX_LIVE_BYTES_FALLBACK, |bytes| bytes / 2).max(BUDGET_BYTES_MIN)
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn mem_total() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_total(&meminfo)
}

fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.trim_start_matches("MemTotal:").trim().trim_end_matches("kB").trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// The memory limit of this process's cgroup (v2 `memory.max`, else v1 `memory.limit_in_bytes`),
/// if it has one.
fn cgroup_limit() -> Option<u64> {
    ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok())
        .and_then(|limit| limit.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_total_is_read_in_bytes() {
        let meminfo = "MemTotal:       24576000 kB\nMemFree:         1000 kB\n";
        assert_eq!(parse_mem_total(meminfo), Some(24_576_000 * 1024));
        assert_eq!(parse_mem_total("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn budgets_default_and_refuse() {
        let options = NodeOptions::default();
        let budgets = Budgets::of(&options).unwrap();
        assert!(budgets.node.node().max() >= BUDGET_BYTES_MIN);
        assert_eq!(budgets.session_bytes, (budgets.node.node().max() / 4).max(BUDGET_BYTES_MIN));
        let tiny = NodeOptions { max_live_bytes: Some(1000), ..NodeOptions::default() };
        assert!(
            matches!(Budgets::of(&tiny), Err(Error::InvalidArgument { reason, .. }) if reason.contains("--max-live-bytes"))
        );
        let inverted = NodeOptions {
            max_live_bytes: Some(1 << 20),
            max_session_live_bytes: Some(2 << 20),
            ..NodeOptions::default()
        };
        assert!(
            matches!(Budgets::of(&inverted), Err(Error::InvalidArgument { reason, .. }) if reason.contains("share"))
        );
    }
}
