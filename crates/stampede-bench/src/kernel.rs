//! What the processes of an exchange cost the kernel while it runs, read from `/proc` without
//! tracing them (a tracer would add its own stops to every system call it counts):
//!
//! - per thread, its **wake-ups**: voluntary context switches, each a block (on a socket, a
//!   futex, `epoll_wait`) that something else had to end; its involuntary switches (preempted);
//!   and the CPU time it ran (`schedstat`, ns);
//! - per process, its **system calls**, counted in the kernel by `perf stat -e
//!   raw_syscalls:sys_enter -p <pid>` (a counter, not a tracer: the process is never stopped),
//!   when `perf` is on `PATH` and may count them; otherwise `None`.
//!
//! A [`Probe`] samples a set of processes before and after a run and keeps the differences;
//! [`Probe::off`] samples nothing, so a benchmark pays for it only when asked. Threads are summed
//! by name (`stampede-node`, `tokio-runtime-w`, …): names say which hand-off a wake-up belongs to.

use std::collections::BTreeMap;
use std::fs;
use std::process::{Child, Command, Stdio};

use crate::BoxResult;

/// The counts of one thread name within a process (summed over its threads of that name).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadCounts {
    /// Threads of this name seen.
    pub threads: u64,
    /// Voluntary context switches: blocks that something ended.
    pub wakeups: u64,
    /// Involuntary context switches: preemptions.
    pub preempted: u64,
    /// CPU time run, ns.
    pub run_ns: u64,
}

/// The counts of one process: its threads by name and its read/write system calls.
#[derive(Clone, Debug, Default)]
pub struct ProcessCounts {
    /// What the process is in the exchange (`"node"`, `"A"`, …).
    pub label: String,
    /// Thread name → counts.
    pub threads: BTreeMap<String, ThreadCounts>,
    /// System calls, when `perf` counted them.
    pub syscalls: Option<u64>,
}

impl ProcessCounts {
    /// The counts of every thread of the process.
    pub fn total(&self) -> ThreadCounts {
        self.threads.values().fold(ThreadCounts::default(), |sum, t| ThreadCounts {
            threads: sum.threads + t.threads,
            wakeups: sum.wakeups + t.wakeups,
            preempted: sum.preempted + t.preempted,
            run_ns: sum.run_ns + t.run_ns,
        })
    }
}

/// Per thread id: its name and counts.
type Snapshot = BTreeMap<u32, (String, ThreadCounts)>;

/// Samples of a set of processes around a run.
#[derive(Default)]
pub struct Probe {
    on: bool,
    processes: Vec<(String, u32)>,
    before: Vec<Snapshot>,
    /// One `perf stat` per process, counting its system calls until stopped.
    counters: Vec<Option<Child>>,
    /// The differences, one per process, once [`stop`](Self::stop) ran.
    pub counts: Vec<ProcessCounts>,
}

impl Probe {
    /// A probe that samples nothing.
    pub fn off() -> Probe {
        Probe::default()
    }

    /// A probe of `processes` (label, pid); more can be [`add`](Self::add)ed before the run.
    pub fn of(processes: &[(&str, u32)]) -> Probe {
        let processes = processes.iter().map(|&(label, pid)| (label.to_owned(), pid)).collect();
        Probe { on: true, processes, ..Probe::default() }
    }

    /// Adds a process started for the run (when the probe is on).
    pub fn add(&mut self, label: &str, pid: u32) {
        if self.on {
            self.processes.push((label.to_owned(), pid));
        }
    }

    /// Samples every process before the run.
    pub fn start(&mut self) -> BoxResult<()> {
        // The counters first: what starting them costs this process is not in its counts.
        self.counters = self.processes.iter().map(|&(_, pid)| count_syscalls(pid)).collect();
        if self.counters.iter().any(Option::is_some) {
            // perf attaches its counters after it starts: give it the time to, or the first
            // round trips would go uncounted.
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        self.before = self.processes.iter().map(|&(_, pid)| snapshot(pid)).collect::<BoxResult<_>>()?;
        Ok(())
    }

    /// Samples every process after the run, before any of them exits, and keeps the
    /// differences. A thread that started during the run counts whole. The system calls of this
    /// process include the probe's own reads of `/proc` at the end (a few hundred per run).
    pub fn stop(&mut self) -> BoxResult<()> {
        if !self.on {
            return Ok(());
        }
        self.counts.clear();
        let counters = std::mem::take(&mut self.counters);
        for (((label, pid), threads_before), counter) in self.processes.iter().zip(&self.before).zip(counters) {
            let threads = snapshot(*pid)?;
            let mut by_name = BTreeMap::<String, ThreadCounts>::new();
            for (tid, (name, after)) in threads {
                let before = threads_before.get(&tid).map(|(_, counts)| *counts).unwrap_or_default();
                let sum = by_name.entry(name).or_default();
                sum.threads += 1;
                sum.wakeups += after.wakeups - before.wakeups;
                sum.preempted += after.preempted - before.preempted;
                sum.run_ns += after.run_ns - before.run_ns;
            }
            self.counts.push(ProcessCounts {
                label: label.clone(),
                threads: by_name,
                syscalls: counter.and_then(syscalls_counted),
            });
        }
        Ok(())
    }
}

/// Every thread of `pid` and the process's system calls, now (nothing when the probe is off:
/// [`Probe::start`] is then called with no process).
fn snapshot(pid: u32) -> BoxResult<Snapshot> {
    let mut threads = BTreeMap::new();
    for entry in fs::read_dir(format!("/proc/{pid}/task"))? {
        let entry = entry?;
        let Ok(tid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let dir = entry.path();
        // A thread may end between the listing and these reads: it is then left out.
        let (Ok(name), Ok(status), Ok(schedstat)) = (
            fs::read_to_string(dir.join("comm")),
            fs::read_to_string(dir.join("status")),
            fs::read_to_string(dir.join("schedstat")),
        ) else {
            continue;
        };
        let counts = ThreadCounts {
            threads: 1,
            wakeups: field(&status, "voluntary_ctxt_switches:")?,
            preempted: field(&status, "nonvoluntary_ctxt_switches:")?,
            run_ns: schedstat.split_whitespace().next().ok_or("empty schedstat")?.parse()?,
        };
        threads.insert(tid, (name.trim().to_owned(), counts));
    }
    Ok(threads)
}

/// `perf stat` counting the system calls of `pid` until interrupted; `None` without `perf`.
fn count_syscalls(pid: u32) -> Option<Child> {
    let mut perf = Command::new("perf");
    perf.args(["stat", "-x,", "-e", "raw_syscalls:sys_enter", "-p", &pid.to_string()]);
    perf.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().ok()
}

/// What an interrupted `perf stat -x,` counted: the first field of its line, when it counted.
fn syscalls_counted(perf: Child) -> Option<u64> {
    // SAFETY: kill(2) with the pid of a child not yet waited for (so not reused) and SIGINT,
    // which `perf stat` answers by printing its counts and exiting.
    unsafe { libc::kill(perf.id() as libc::pid_t, libc::SIGINT) };
    let output = perf.wait_with_output().ok()?;
    let text = String::from_utf8_lossy(&output.stderr);
    let line = text.lines().find(|line| line.contains("raw_syscalls:sys_enter"))?;
    line.split(',').next()?.parse().ok()
}

/// The number after `key` on its line of a `/proc` file.
fn field(text: &str, key: &str) -> BoxResult<u64> {
    let line = text.lines().find(|line| line.starts_with(key)).ok_or_else(|| format!("no {key} in /proc"))?;
    Ok(line[key.len()..].trim().parse()?)
}

#[cfg(test)]
mod tests {
    use super::Probe;

    #[test]
    fn a_thread_that_blocks_is_counted_as_woken() {
        let mut probe = Probe::of(&[("this", std::process::id())]);
        probe.start().unwrap();
        let (slept, done) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
        let sleeper = std::thread::Builder::new().name("probe-sleeper".into());
        let handle = sleeper.spawn(move || {
            // Each sleep blocks the thread until its timer ends it: at least one wake-up each.
            (0..3).for_each(|_| std::thread::sleep(std::time::Duration::from_millis(1)));
            slept.0.send(()).unwrap();
            // Alive until sampled: the probe reads only threads that still exist.
            let _ = done.1.recv();
        });
        slept.1.recv().unwrap();
        probe.stop().unwrap();
        drop(done.0);
        handle.unwrap().join().unwrap();
        let sleeper = probe.counts[0].threads["probe-sleeper"];
        assert!(sleeper.wakeups >= 3, "{sleeper:?}");
        assert_eq!(sleeper.threads, 1);
    }
}
