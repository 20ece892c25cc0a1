//! `stampede serve` and `stampede ls` as real processes on loopback, with clients in threads and
//! in a child process that is killed.
//!
//! Every wait is bounded; every process a test starts is killed by a guard when the test ends
//! (and by the watchdog before it aborts a hung test). Endpoints are Unix sockets in a directory
//! of the test's own, or a TCP port the system just handed out, so parallel tests never collide.

use std::process::Command;
use std::thread;
use std::time::Duration;

use stampede::{Error, Limits, Selector, INFINITY, OLDEST_UNSEEN};

mod process;
use process::{client, eventually, serve, unix_endpoint, with_watchdog, Process, WAIT, WATCHDOG};

/// The liveliness timeout the killed-client test gives its node.
const LIVELINESS_TIMEOUT_S: &str = "2";
/// The environment variable that makes `holder_child_process` act as the killed client.
const HOLDER_ENV: &str = "STAMPEDE_TEST_HOLDER_ENDPOINT";

/// What the holder prints once it holds its items.
const HOLDING: &str = "holder: holding";

/// `stampede ls` against `endpoint`: its stdout lines.
fn ls(endpoint: &str, prefix: &str) -> Vec<String> {
    ls_with(endpoint, &[prefix])
}

/// `stampede ls <args>` against `endpoint`: its stdout lines.
fn ls_with(endpoint: &str, args: &[&str]) -> Vec<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .arg("ls")
        .args(args)
        .args(["--connect", endpoint, "--timeout", "20"])
        .output()
        .expect("stampede ls runs");
    assert!(output.status.success(), "stampede ls failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("utf-8").lines().map(str::to_owned).collect()
}

/// `stampede ls --ts-min` says what holds the node's ts_min: a client's task by id, label and
/// session, and a queue whose item nobody consumed; once they let go, that nothing does.
#[test]
fn ls_says_what_holds_ts_min() {
    with_watchdog("ls_says_what_holds_ts_min", || {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = unix_endpoint(&dir);
        let _node = serve(&endpoint, &[]);
        let rt = client(&endpoint);
        let jobs = rt.create_queue("jobs", Limits::unbounded()).unwrap();
        let tracker = rt.task(3).unwrap();
        tracker.set_name("tracker").unwrap();
        let producer = rt.task(3).unwrap();
        producer.attach_output(&jobs).unwrap().put(3, &b"job"[..], None).unwrap();
        producer.close();
        let lines = ls_with(&endpoint, &["--ts-min"]);
        assert_eq!(lines[..2], ["jobs", "ts_min 3"], "{lines:?}");
        let task = format!("held by task {} \"tracker\" (session ", tracker.id());
        assert!(lines.iter().any(|line| line.starts_with(&task)), "{lines:?}");
        assert!(lines.contains(&"held by queue jobs".to_owned()), "{lines:?}");

        tracker.close();
        let input = rt.task(INFINITY).unwrap().attach_input(&jobs).unwrap();
        let job = input.get(Some(WAIT)).unwrap();
        input.consume(&job).unwrap();
        let lines = ls_with(&endpoint, &["--ts-min"]);
        assert_eq!(lines[1..], ["ts_min 4", "held by nothing: ts_min is past the highest timestamp put"], "{lines:?}");
        rt.close();
    });
}

/// `stampede info <name>` says what a channel is and who uses it, from the node's graph; an
/// unknown name is one line naming it, exit code 1.
#[test]
fn info_says_what_a_channel_is_and_who_uses_it() {
    with_watchdog("info_says_what_a_channel_is_and_who_uses_it", || {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = unix_endpoint(&dir);
        let _node = serve(&endpoint, &["--name", "a"]);
        let rt = client(&endpoint);
        let frames = rt.create_channel("camera/frames", Limits::items(8)).unwrap();
        let camera = rt.task(0).unwrap();
        camera.set_name("camera").unwrap();
        let out = camera.attach_output(&frames).unwrap();
        let tracker = rt.task(INFINITY).unwrap();
        tracker.set_name("tracker").unwrap();
        let input = tracker.attach_input(&frames).unwrap();
        for ts in 0..3 {
            out.put(ts, &b"frame"[..]).unwrap();
        }
        input.consume(input.get(OLDEST_UNSEEN, Some(WAIT)).unwrap().ts).unwrap();
        let info = |name: &str| {
            Command::new(env!("CARGO_BIN_EXE_stampede"))
                .args(["info", name, "--connect", &endpoint, "--timeout", "20"])
                .output()
                .expect("stampede info runs")
        };
        let output = info("camera/frames");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let text = String::from_utf8(output.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "camera/frames: channel on node a", "{text}");
        assert_eq!(lines[1], "bounds: capacity 8, max_bytes unbounded; codec any; description \"\"", "{text}");
        assert_eq!(lines[2], "live: 3 items, 15 bytes; puts 3, gets 1, reclaimed 0, dropped 0", "{text}");
        assert_eq!(lines[3], "put log: off until now (`stampede hz camera/frames` follows it)", "{text}");
        assert_eq!(lines[4], "claim on ts_min: 1 (ts_min 0)", "{text}");
        // Asked once, the log notes the puts that follow: the next info gives their rate.
        for ts in 3..6 {
            out.put(ts, &b"frame"[..]).unwrap();
        }
        let again = String::from_utf8(info("camera/frames").stdout).unwrap();
        let rate = again.lines().nth(3).unwrap_or_default();
        assert!(
            rate.starts_with("put log: rate ") && rate.contains("over 3 puts") && rate.contains("ts 3 .. 5"),
            "{again}"
        );
        assert!(lines
            .iter()
            .any(|l| l.starts_with("producer: task") && l.contains("\"camera\"") && l.ends_with("put 3")));
        // A client's input connection has a tape on its node (docs/NODES.md, "Tapes").
        let consumer = "got 1, skipped 0, reads unknown over 1 gets (0 found nothing)";
        assert!(lines.iter().any(|l| l.starts_with("consumer: task") && l.ends_with(consumer)), "{text}");

        let missing = info("nothing/here");
        assert_eq!(missing.status.code(), Some(1));
        let message = String::from_utf8_lossy(&missing.stderr);
        assert!(message.contains("no channel or queue named \"nothing/here\""), "{message}");
        rt.close();
    });
}

/// `stampede hz` reads a channel's put log on its node, a line a second: the rate over the window
/// and its intervals, the bandwidth and sizes of what a client puts meanwhile (its figures are
/// checked against the puts' sizes and timestamps, not against a clock); an unknown channel is one
/// line and exit 1.
#[test]
fn hz_says_how_a_channel_is_doing() {
    with_watchdog("hz_says_how_a_channel_is_doing", || {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = unix_endpoint(&dir);
        let _node = serve(&endpoint, &["--name", "a"]);
        let rt = client(&endpoint);
        let frames = rt.create_channel("camera/frames", Limits::unbounded()).unwrap();
        let hz = |name: &str| {
            let args = ["hz", name, "--connect", &endpoint, "--count", "3", "--window", "10", "--timeout", "20"];
            Command::new(env!("CARGO_BIN_EXE_stampede")).args(args).output().expect("stampede hz runs")
        };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let producer = thread::spawn({
            let (camera, stop) = (rt.task(0).unwrap(), stop.clone());
            let out = camera.attach_output(&frames).unwrap();
            move || {
                let mut ts = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    out.put(ts, vec![0u8; 1000].as_slice()).unwrap();
                    camera.set_virtual_time(ts + 1).unwrap();
                    ts += 1;
                    thread::sleep(Duration::from_millis(20)); // a paced camera's period
                }
            }
        });
        let output = hz("camera/frames");
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        producer.join().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let text = String::from_utf8(output.stdout).unwrap();
        let last = text.lines().last().unwrap_or_default();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(last.starts_with("rate ") && last.contains(" Hz over 10 puts: interval min "), "{text}");
        assert!(last.contains("sizes 1.0 KB .. 1.0 KB"), "{text}");

        let missing = hz("nothing/here");
        assert_eq!(missing.status.code(), Some(1));
        let message = String::from_utf8_lossy(&missing.stderr);
        assert!(message.contains("no channel named \"nothing/here\""), "{message}");
        assert_eq!(message.lines().count(), 1, "{message}");
        rt.close();
    });
}

/// `stampede serve` on TCP prints exactly `listening on <endpoint>`, serves `stampede ls`, and
/// exits 0 on SIGTERM; a second node on the same port fails with a clear message.
#[test]
fn serve_listens_lists_and_stops_on_sigterm() {
    with_watchdog("serve_listens_lists_and_stops_on_sigterm", || {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let endpoint = format!("tcp/127.0.0.1:{port}");
        let mut node = serve(&endpoint, &["--name", "cli-test"]);
        assert!(ls(&endpoint, "").is_empty());
        let rt = client(&endpoint);
        assert_eq!(rt.node(), Some("cli-test"));
        rt.create_channel("camera/left", Limits::unbounded()).unwrap();
        rt.create_queue("camera/jobs", Limits::unbounded()).unwrap();
        rt.create_channel("audio", Limits::unbounded()).unwrap();
        assert_eq!(ls(&endpoint, "camera/"), vec!["camera/jobs", "camera/left"]);
        assert_eq!(ls(&endpoint, ""), vec!["audio", "camera/jobs", "camera/left"]);
        let clash = Command::new(env!("CARGO_BIN_EXE_stampede")).args(["serve", "--listen", &endpoint]).output();
        let clash = clash.expect("stampede serve runs");
        assert!(!clash.status.success());
        assert!(String::from_utf8_lossy(&clash.stderr).starts_with("stampede: "), "{clash:?}");
        rt.close();
        node.signal("TERM");
        assert!(node.wait().success());
    });
}

/// Two clients of a `stampede serve` process share a channel (in-order reading of every frame,
/// reclaimed behind the reader), and a queue feeds two workers, each item to exactly one.
#[test]
fn clients_share_a_channel_and_a_queue() {
    with_watchdog("clients_share_a_channel_and_a_queue", || {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = unix_endpoint(&dir);
        let _node = serve(&endpoint, &[]);
        const FRAMES: i64 = 20;
        let setup = client(&endpoint);
        let frames = setup.create_channel("frames", Limits::unbounded()).unwrap();
        let jobs = setup.create_queue("jobs", Limits::items(4)).unwrap();

        // The reader attaches before the camera's first put: a task at INFINITY attaching later
        // would find the frames already put consumed on its new connection (docs/SEMANTICS.md,
        // "Channels").
        let (attached, reader_attached) = std::sync::mpsc::channel();
        let reader = {
            let endpoint = endpoint.clone();
            thread::spawn(move || {
                let rt = client(&endpoint);
                let task = rt.task(INFINITY).unwrap();
                let inp = task.attach_input(&rt.channel("frames").unwrap()).unwrap();
                attached.send(()).unwrap();
                let mut seen = Vec::new();
                while seen.len() < FRAMES as usize {
                    let item = inp.get(OLDEST_UNSEEN, Some(WAIT)).unwrap();
                    assert_eq!(item.data()[..], item.ts.to_le_bytes());
                    seen.push(item.ts);
                    inp.consume(item.ts).unwrap();
                }
                seen
            })
        };
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let endpoint = endpoint.clone();
                thread::spawn(move || {
                    let rt = client(&endpoint);
                    let task = rt.task(INFINITY).unwrap();
                    let inp = task.attach_input(&rt.queue("jobs").unwrap()).unwrap();
                    let mut done = Vec::new();
                    loop {
                        match inp.get(Some(Duration::from_secs(3))) {
                            Ok(job) if job.item.data()[..] == b"stop"[..] => {
                                inp.consume(&job).unwrap();
                                return done;
                            }
                            Ok(job) => {
                                done.push(job.item.ts);
                                inp.consume(&job).unwrap();
                            }
                            Err(Error::NotAvailable { .. }) => {}
                            Err(e) => panic!("worker: {e}"),
                        }
                    }
                })
            })
            .collect();

        reader_attached.recv_timeout(WAIT).expect("the reader attaches");
        let writer = client(&endpoint);
        let camera = writer.task(0).unwrap();
        let out = camera.attach_output(&writer.channel("frames").unwrap()).unwrap();
        let splitter = writer.task(0).unwrap();
        let work = splitter.attach_output(&writer.queue("jobs").unwrap()).unwrap();
        for ts in 0..FRAMES {
            out.put(ts, ts.to_le_bytes().to_vec()).unwrap();
            camera.set_virtual_time(ts + 1).unwrap();
            work.put(ts, vec![1u8], Some(WAIT)).unwrap();
        }
        work.put(FRAMES, &b"stop"[..], Some(WAIT)).unwrap();
        work.put(FRAMES, &b"stop"[..], Some(WAIT)).unwrap();
        splitter.set_virtual_time(INFINITY).unwrap();

        assert_eq!(reader.join().unwrap(), (0..FRAMES).collect::<Vec<_>>());
        let mut done: Vec<i64> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
        done.sort();
        assert_eq!(done, (0..FRAMES).collect::<Vec<_>>(), "each job to exactly one worker");
        eventually("frames reclaimed behind the reader", || frames.stats().live_items == 0);
        assert_eq!(jobs.stats().live_items, 0);
    });
}

/// A client process killed with SIGKILL while it holds a channel item and a queue item open:
/// within the liveliness timeout the node closes its session, ts_min advances past the item, and
/// the queue item goes back to another worker.
#[test]
fn killed_client_releases_its_claims() {
    with_watchdog("killed_client_releases_its_claims", || {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = unix_endpoint(&dir);
        let _node = serve(&endpoint, &["--liveliness-timeout", LIVELINESS_TIMEOUT_S]);
        let rt = client(&endpoint);
        let frames = rt.create_channel("frames", Limits::unbounded()).unwrap();
        let jobs = rt.create_queue("jobs", Limits::unbounded()).unwrap();
        let camera = rt.task(0).unwrap();
        camera.attach_output(&frames).unwrap().put(0, &b"frame"[..]).unwrap();
        camera.attach_output(&jobs).unwrap().put(5, &b"job"[..], None).unwrap();

        let holder = Process::spawn(
            Command::new(std::env::current_exe().unwrap())
                .args(["holder_child_process", "--exact", "--nocapture", "--test-threads=1"])
                .env(HOLDER_ENV, &endpoint),
        );
        // The harness prints the test's name on the same line, before the test's own output.
        holder.line(|line| line.ends_with(HOLDING));
        camera.set_virtual_time(10).unwrap();
        assert_eq!(rt.ts_min(), 0, "the holder's open frame holds ts_min");
        let worker = rt.task(INFINITY).unwrap();
        let inp = worker.attach_input(&jobs).unwrap();
        assert!(matches!(inp.get(Some(Duration::ZERO)), Err(Error::NotAvailable { .. })), "the holder has the job");

        holder.signal("KILL");
        eventually("ts_min passes the killed client's frame", || rt.ts_min() == 5);
        assert_eq!(frames.stats().live_items, 0, "frame 0 was reclaimed");
        let job = inp.get(Some(WAIT)).expect("the killed client's job came back");
        assert_eq!((job.item.ts, &job.item.data()[..]), (5, &b"job"[..]));
        inp.consume(&job).unwrap();
        assert_eq!(rt.ts_min(), 6, "one above the highest timestamp put");
    });
}

/// Not a test on its own: the client process `killed_client_releases_its_claims` starts and
/// kills. With `STAMPEDE_TEST_HOLDER_ENDPOINT` set, it opens the frame and the job on that node,
/// prints [`HOLDING`], and waits to be killed; without it, it returns at once.
#[test]
fn holder_child_process() {
    let Ok(endpoint) = std::env::var(HOLDER_ENV) else { return };
    let rt = client(&endpoint);
    // At virtual time 0, attaching consumes nothing; once frame 0 is open, only it (and the job)
    // hold the task's visibility.
    let task = rt.task(0).unwrap();
    let frame = task.attach_input(&rt.channel("frames").unwrap()).unwrap();
    assert_eq!(frame.get(Selector::At(0), Some(WAIT)).unwrap().ts, 0);
    task.set_virtual_time(INFINITY).unwrap();
    let jobs = task.attach_input(&rt.queue("jobs").unwrap()).unwrap();
    assert_eq!(&jobs.get(Some(WAIT)).unwrap().item.data()[..], b"job");
    println!("{HOLDING}");
    // This child holds its task and item until the parent kills it: nothing to await (the watchdog bounds it).
    thread::sleep(WATCHDOG);
}

/// An `.npy` payload of a 2×3 little-endian f32 array.
fn npy_2x3() -> Vec<u8> {
    let mut bytes = stampede::npy::encode_header("'<f4'", &[2, 3]).unwrap();
    bytes.extend((1..=6).flat_map(|x| (x as f32 / 2.0).to_le_bytes()));
    bytes
}

/// `stampede tail` follows a channel: a line per item with its timestamp, size and codec, the
/// text of a utf8 item, the dtype, shape and values of a small npy one; it holds nothing back (the channel's
/// items are reclaimed as it reads them) and exits 0 when the channel is destroyed.
#[test]
fn tail_follows_a_channel_until_it_goes() {
    with_watchdog("tail_follows_a_channel_until_it_goes", || {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = unix_endpoint(&dir);
        let _node = serve(&endpoint, &["--name", "tail-test"]);
        let rt = client(&endpoint);
        let ch = rt.create_channel("camera/left", Limits::unbounded()).unwrap();
        let camera = rt.task(0).unwrap();
        let out = camera.attach_output(&ch).unwrap();
        let mut tail = Process::spawn(Command::new(env!("CARGO_BIN_EXE_stampede")).args([
            "tail",
            "camera/left",
            "--connect",
            &endpoint,
            "--timeout",
            "20",
        ]));
        assert_eq!(tail.line(|_| true), "following camera/left on node tail-test");
        out.put(0, "hello").unwrap();
        assert_eq!(tail.line(|_| true), r#"ts=0 size=5 codec=utf8 "hello""#);
        let npy = npy_2x3();
        out.put(1, stampede::Parts { parts: &[&npy], codec: stampede::Codec::Npy }).unwrap();
        let line = tail.line(|_| true);
        let values = "values=[[0.5,1.0,1.5],[2.0,2.5,3.0]]";
        assert_eq!(line, format!("ts=1 size={} codec=npy dtype='<f4' shape=[2, 3] {values}", npy.len()));
        camera.set_virtual_time(2).unwrap();
        eventually("the tail's reads let the items go", || ch.stats().live_items == 0);
        ch.destroy().unwrap();
        assert_eq!(tail.line(|_| true), "camera/left is gone");
        assert!(tail.wait().success());
    });
}

/// Failures (docs/NODES.md, "Failures and liveliness"): a call under way when its node is killed
/// (SIGKILL: no goodbye on the fabric) fails `Unreachable` — zenoh ends the query when the node's
/// link or route goes — and never hangs: blocking gets and their async form, all waiting for ever,
/// of a client connected to the node and of one whose session is on it through another node
/// (measured: within 6 ms of the kill, against the slice and reply margin of 6 s that bound a query
/// otherwise).
#[test]
fn a_call_under_way_fails_when_its_node_is_killed() {
    with_watchdog("a_call_under_way_fails_when_its_node_is_killed", || {
        let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a_endpoint, b_endpoint) = (unix_endpoint(&a_dir), unix_endpoint(&b_dir));
        let a = serve(&a_endpoint, &["--name", "a"]);
        let _b = serve(&b_endpoint, &["--name", "b", "--connect", &a_endpoint]);
        let clients = [client(&a_endpoint), stampede::connect_to(&b_endpoint, "a", Some(WAIT)).unwrap()];
        let mut getters = Vec::new();
        for (n, rt) in clients.iter().enumerate() {
            let ch = rt.create_channel(&format!("frames/{n}"), Limits::unbounded()).unwrap();
            let task = rt.task(0).unwrap();
            let blocking = task.attach_input(&ch).unwrap();
            let asynchronous = task.attach_input(&ch).unwrap();
            getters.push((format!("client {n}, blocking"), thread::spawn(move || blocking.get(5, None))));
            getters.push((
                format!("client {n}, async"),
                thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
                    runtime.block_on(asynchronous.get_async(5, None))
                }),
            ));
        }
        // Nothing outside the clients observes their gets parked on node a: the pause makes the kill hit blocked calls; the result holds either way.
        thread::sleep(Duration::from_millis(300));
        a.signal("KILL");
        for (form, getter) in getters {
            match getter.join().unwrap() {
                Err(Error::Unreachable { name, .. }) => assert_eq!(name, "a", "{form}"),
                other => panic!("{form}: {other:?}"),
            }
        }
    });
}
