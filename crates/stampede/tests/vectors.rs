//! The shared test vectors (`tests/vectors/*.vectors`, format in `tests/vectors/README.md`), run
//! by the Rust client: the same cases the Python, C and Java suites run, so the four agree. Each
//! case runs on a fresh runtime of the conformance configuration in force (`configuration.rs`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use stampede::{
    ChannelInput, ChannelOutput, Codec, Container, Error, Item, Limits, Payload, PutOptions, QueueInput, QueueItem,
    QueueOutput, Selector, Task, Timestamp, INFINITY,
};

mod configuration;

/// The vectors' directory.
fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors")
}

/// One case: its name, and its operations with their line numbers.
struct Case {
    name: String,
    lines: Vec<(usize, String)>,
}

/// The cases of one vectors file.
fn cases(text: &str) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        match line.strip_prefix("case ") {
            Some(name) => cases.push(Case { name: name.trim().to_owned(), lines: Vec::new() }),
            None => cases.last_mut().expect("an operation before the first case").lines.push((number + 1, line.into())),
        }
    }
    cases
}

/// A connection a case attached.
enum Conn {
    ChannelIn(ChannelInput),
    ChannelOut(ChannelOutput),
    QueueIn(QueueInput, HashMap<Timestamp, QueueItem>),
    QueueOut(QueueOutput),
}

/// What an operation gave, written as the vectors write expected values.
fn outcome<T>(result: stampede::Result<T>, show: impl FnOnce(T) -> String) -> String {
    match result {
        Ok(value) => show(value),
        Err(e) => error_name(&e).to_owned(),
    }
}

/// An error's type, as every client names it.
fn error_name(e: &Error) -> &'static str {
    e.kind().name()
}

fn ok(_: impl Sized) -> String {
    "ok".into()
}

/// A payload token: `-`, `text:<percent-encoded>` or `hex:<bytes>`.
fn payload(token: &str) -> Vec<u8> {
    if token == "-" {
        return Vec::new();
    }
    if let Some(hex) = token.strip_prefix("hex:") {
        return (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex")).collect();
    }
    let text = token.strip_prefix("text:").unwrap_or_else(|| panic!("payload {token:?}"));
    let mut bytes = Vec::new();
    let mut rest = text.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            bytes.push(u8::from_str_radix(std::str::from_utf8(&tail[..2]).unwrap(), 16).expect("%XX"));
            rest = &tail[2..];
        } else {
            bytes.push(b);
            rest = tail;
        }
    }
    bytes
}

/// An item as the vectors write it: `item <ts> <codec> <payload>`, the payload as `hex:` (or `-`).
fn show_item(ts: Timestamp, codec: &Codec, data: &[u8]) -> String {
    let bytes = if data.is_empty() { "-".to_owned() } else { format!("hex:{}", hex(data)) };
    format!("item {ts} {} {bytes}", codec.name())
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// The expected value with its payload normalised to `hex:` (so `text:` and `hex:` compare).
fn normalise(expected: &str) -> String {
    let tokens: Vec<&str> = expected.split(' ').collect();
    match tokens.as_slice() {
        ["item", ts, codec, bytes] => show_item(ts.parse().unwrap(), &Codec::from_name(codec), &payload(bytes)),
        _ => expected.to_owned(),
    }
}

fn timestamp(token: &str) -> Timestamp {
    if token == "inf" {
        INFINITY
    } else {
        token.parse().unwrap_or_else(|_| panic!("timestamp {token:?}"))
    }
}

fn timeout(token: &str) -> Option<Duration> {
    Some(Duration::from_millis(token.parse().expect("timeout_ms")))
}

fn selector(token: &str) -> Selector {
    match token {
        "oldest" => Selector::Oldest,
        "newest" => Selector::Newest,
        "oldest_unseen" => Selector::OldestUnseen,
        "newest_unseen" => Selector::NewestUnseen,
        ts => Selector::At(timestamp(ts)),
    }
}

fn capacity(token: &str) -> stampede::Result<Limits> {
    Ok(match token {
        "-" => Limits::unbounded(),
        n => Limits::items(n.parse().expect("capacity")),
    })
}

fn show_shape(shape: &[usize]) -> String {
    if shape.is_empty() {
        return "scalar".into();
    }
    shape.iter().map(usize::to_string).collect::<Vec<_>>().join("x")
}

/// Runs one case on a fresh runtime; `Err` names the first line whose outcome differs.
fn run(case: &Case) -> Result<(), String> {
    let rt = configuration::runtime();
    let mut tasks: HashMap<String, Task> = HashMap::new();
    let mut conns: HashMap<String, Conn> = HashMap::new();
    for (number, line) in &case.lines {
        let (op, expected) = line.split_once(" -> ").ok_or_else(|| format!("line {number}: no \" -> \""))?;
        let t: Vec<&str> = op.split(' ').collect();
        let task = |name: &str| tasks.get(name).unwrap_or_else(|| panic!("line {number}: no task {name}"));
        let attach = |container: &str, input: bool, task: &Task| -> stampede::Result<Conn> {
            Ok(match rt.lookup(container)? {
                Container::Channel(ch) if input => Conn::ChannelIn(task.attach_input(&ch)?),
                Container::Channel(ch) => Conn::ChannelOut(task.attach_output(&ch)?),
                Container::Queue(q) if input => Conn::QueueIn(task.attach_input(&q)?, HashMap::new()),
                Container::Queue(q) => Conn::QueueOut(task.attach_output(&q)?),
            })
        };
        let got = match t.as_slice() {
            ["channel", name, cap] => outcome(capacity(cap).and_then(|limits| rt.create_channel(name, limits)), ok),
            ["queue", name, cap] => outcome(capacity(cap).and_then(|limits| rt.create_queue(name, limits)), ok),
            ["task", name, vt] => {
                let vt = timestamp(vt);
                outcome(rt.task(vt), |created| {
                    tasks.insert(name.to_string(), created);
                    "ok".into()
                })
            }
            ["vt", name, vt] => outcome(task(name).set_virtual_time(timestamp(vt)), ok),
            ["close", name] => {
                task(name).close();
                "ok".into()
            }
            ["in" | "out", conn, name, container] => {
                let attached = attach(container, t[0] == "in", task(name));
                outcome(attached, |attached| {
                    conns.insert(conn.to_string(), attached);
                    "ok".into()
                })
            }
            ["detach", conn] => {
                match &conns[*conn] {
                    Conn::ChannelIn(c) => c.detach(),
                    Conn::ChannelOut(c) => c.detach(),
                    Conn::QueueIn(c, _) => c.detach(),
                    Conn::QueueOut(c) => c.detach(),
                }
                "ok".into()
            }
            ["put" | "tryput" | "putref", conn, ts, codec, bytes, rest @ ..] => {
                let data = Payload { data: payload(bytes).into(), codec: Codec::from_name(codec) };
                let wait = if t[0] == "tryput" { Some(Duration::ZERO) } else { None };
                let refcount = rest.first().map(|r| r.parse().expect("refcount"));
                let ts = ts.parse::<Timestamp>().expect("ts");
                match &conns[*conn] {
                    Conn::ChannelOut(o) => outcome(o.put_with(ts, data, PutOptions { refcount, timeout: wait }), ok),
                    Conn::QueueOut(o) => outcome(o.put(ts, data, wait), ok),
                    _ => panic!("line {number}: {conn} is not an output"),
                }
            }
            ["get", conn, sel, ms] => match &conns[*conn] {
                Conn::ChannelIn(i) => outcome(i.get(selector(sel), timeout(ms)), |item: Item| {
                    show_item(item.ts, item.codec(), item.data())
                }),
                _ => panic!("line {number}: {conn} is not a channel input"),
            },
            ["qget", conn, ms] => match conns.get_mut(*conn) {
                Some(Conn::QueueIn(i, held)) => outcome(i.get(timeout(ms)), |got| {
                    let shown = show_item(got.item.ts, got.item.codec(), got.item.data());
                    held.insert(got.item.ts, got);
                    shown
                }),
                _ => panic!("line {number}: {conn} is not a queue input"),
            },
            ["consume", conn, ts] => match &conns[*conn] {
                Conn::ChannelIn(i) => outcome(i.consume(timestamp(ts)), ok),
                _ => panic!("line {number}: {conn} is not a channel input"),
            },
            ["qconsume", conn, ts] => match conns.get_mut(*conn) {
                Some(Conn::QueueIn(i, held)) => {
                    let got = held.remove(&timestamp(ts)).unwrap_or_else(|| panic!("line {number}: not gotten"));
                    outcome(i.consume(&got), ok)
                }
                _ => panic!("line {number}: {conn} is not a queue input"),
            },
            ["until", conn, ts] => match &conns[*conn] {
                Conn::ChannelIn(i) => outcome(i.consume_until(timestamp(ts)), ok),
                _ => panic!("line {number}: {conn} is not a channel input"),
            },
            ["range", conn, t0, t1] => match &conns[*conn] {
                Conn::ChannelIn(i) => outcome(i.get_range(timestamp(t0), timestamp(t1)), |items| {
                    let list: Vec<String> = items.iter().map(|item| item.ts.to_string()).collect();
                    format!("items {}", if list.is_empty() { "-".into() } else { list.join(",") })
                }),
                _ => panic!("line {number}: {conn} is not a channel input"),
            },
            ["destroy", container] => outcome(
                rt.lookup(container).and_then(|c| match c {
                    Container::Channel(ch) => ch.destroy(),
                    Container::Queue(q) => q.destroy(),
                }),
                ok,
            ),
            ["lookup", container] => outcome(rt.lookup(container), ok),
            // What reclamation shows, read once it settled (across nodes, within a bounded time).
            ["ts_min"] => configuration::settled(normalise(expected), || show_ts(rt.ts_min())),
            ["live", container] => configuration::settled(normalise(expected), || {
                outcome(rt.lookup(container), |c| {
                    let stats = match c {
                        Container::Channel(ch) => ch.stats(),
                        Container::Queue(q) => q.stats(),
                    };
                    stats.live_items.to_string()
                })
            }),
            ["npy", bytes] => match stampede::npy::header(&payload(bytes)) {
                Ok(header) => format!("npy {} {}", header.plain_descr(), show_shape(&header.shape)),
                Err(_) => "InvalidArgument".to_owned(),
            },
            _ => return Err(format!("line {number}: unknown operation {op:?}")),
        };
        if got != normalise(expected) {
            return Err(format!("line {number}: `{op}` gave `{got}`, expected `{expected}`"));
        }
    }
    Ok(())
}

fn show_ts(ts: Timestamp) -> String {
    if ts == INFINITY {
        "inf".into()
    } else {
        ts.to_string()
    }
}

/// Every case of every vectors file gives the expected outcome of every operation.
#[test]
fn shared_vectors() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(vectors_dir())
        .expect("tests/vectors")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "vectors"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no vectors in {}", vectors_dir().display());
    let mut failures = Vec::new();
    let mut count = 0;
    for file in &files {
        for case in cases(&std::fs::read_to_string(file).unwrap()) {
            count += 1;
            if let Err(e) = run(&case) {
                failures.push(format!("{} case {}: {e}", file.display(), case.name));
            }
        }
    }
    assert!(failures.is_empty(), "{} of {count} cases failed:\n{}", failures.len(), failures.join("\n"));
}
