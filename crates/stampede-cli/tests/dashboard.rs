//! `stampede serve --dashboard <port>` and `stampede dashboard --connect <endpoint>` as real
//! processes: each prints `dashboard on <url>`, the page's snapshot shows the node's channels,
//! and SIGTERM ends it with status 0.
//!
//! Every wait is bounded by [`WAIT`]; every process is killed when its guard drops, and by the
//! watchdog before it aborts a hung test.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine;
use stampede::Limits;

mod process;
use process::{with_watchdog, Process, WAIT};

/// A `stampede` process with `args`, and `env` added to its environment.
fn stampede(args: &[&str], env: &[(&str, &str)]) -> Process {
    Process::spawn(Command::new(env!("CARGO_BIN_EXE_stampede")).args(args).envs(env.iter().copied()))
}

/// The address in the process's next line, `dashboard on http://<address>/`.
fn dashboard_address(process: &Process) -> SocketAddr {
    let line = process.line(|_| true);
    let url = line.strip_prefix("dashboard on ").unwrap_or_else(|| panic!("unexpected line {line:?}"));
    let address = url.strip_prefix("http://").and_then(|rest| rest.strip_suffix('/')).expect("an http URL");
    address.parse().expect("host:port")
}

/// SIGTERM, then the exit status (within [`WAIT`]).
fn terminate(process: &mut Process) -> std::process::ExitStatus {
    process.signal("TERM");
    process.wait()
}

/// `GET path`: status and body.
fn http_get(address: SocketAddr, path: &str) -> (u16, String) {
    http_get_as(address, path, None)
}

/// `GET path` as `(user, password)` (HTTP Basic) if given: status and body.
fn http_get_as(address: SocketAddr, path: &str, login: Option<(&str, &str)>) -> (u16, String) {
    let mut stream = TcpStream::connect_timeout(&address, WAIT).expect("the dashboard accepts");
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let authorization = login.map_or(String::new(), |(user, password)| {
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Authorization: Basic {encoded}\r\n")
    });
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {address}\r\n{authorization}Connection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, response.split_once("\r\n\r\n").map_or("", |(_, body)| body).to_owned())
}

/// Polls `/api/snapshot` until it mentions `text`.
fn snapshot_mentioning(address: SocketAddr, text: &str) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let (status, body) = http_get(address, "/api/snapshot");
        assert_eq!(status, 200, "{body}");
        if body.contains(text) {
            return body;
        }
        assert!(Instant::now() < deadline, "no {text} in the snapshot within {WAIT:?}: {body}");
        // The snapshot is polled over HTTP: nothing signals the text's arrival to the test.
        thread::sleep(Duration::from_millis(50));
    }
}

fn unix_endpoint(dir: &tempfile::TempDir) -> String {
    format!("unixsock-stream/{}", dir.path().join("node.sock").display())
}

/// `stampede serve --dashboard 0` serves the page of its own runtime after its endpoints.
#[test]
fn serve_with_a_dashboard() {
    with_watchdog("serve_with_a_dashboard", || {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = unix_endpoint(&dir);
        let mut node = stampede(&["serve", "--listen", &endpoint, "--dashboard", "0", "--image", "camera/left"], &[]);
        assert_eq!(node.line(|_| true), format!("listening on {endpoint}"));
        let address = dashboard_address(&node);
        let (status, page) = http_get(address, "/");
        assert!(status == 200 && page.contains("id=\"channels\""), "{status} {page}");

        let client = stampede::connect(&endpoint, Some(WAIT)).unwrap();
        client.create_channel("camera/left", Limits::items(4)).unwrap();
        let snapshot = snapshot_mentioning(address, "\"name\":\"camera/left\"");
        assert!(snapshot.contains("\"status\":\"waiting\""), "no frame yet: {snapshot}");
        client.close();
        assert!(terminate(&mut node).success());
    });
}

/// `stampede dashboard --connect <endpoint> --port 0` serves the page of a remote node.
#[test]
fn dashboard_of_a_remote_node() {
    with_watchdog("dashboard_of_a_remote_node", || {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = unix_endpoint(&dir);
        let node = stampede(&["serve", "--listen", &endpoint, "--name", "kiosk"], &[]);
        assert_eq!(node.line(|_| true), format!("listening on {endpoint}"));
        let client = stampede::connect(&endpoint, Some(WAIT)).unwrap();
        client.create_channel("tracker/boxes", Limits::unbounded()).unwrap();

        let mut dashboard = stampede(&["dashboard", "--connect", &endpoint, "--port", "0", "--refresh", "0.05"], &[]);
        let address = dashboard_address(&dashboard);
        let snapshot = snapshot_mentioning(address, "\"name\":\"tracker/boxes\"");
        assert!(snapshot.contains("\"node\":\"kiosk\""), "{snapshot}");
        assert!(terminate(&mut dashboard).success());
        client.close();
    });
}

/// `stampede serve --access <policy> --dashboard 0`: the dashboard asks for a login — `401`
/// without credentials, with a wrong password, or for a user without `read` on `""`; the
/// snapshot for a user with it.
#[test]
fn serve_with_access_and_a_dashboard_asks_for_a_login() {
    with_watchdog("serve_with_access_and_a_dashboard_asks_for_a_login", || {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = unix_endpoint(&dir);
        let hash = |password| stampede_node::access::hash_password(password).unwrap();
        let policy = dir.path().join("policy.toml");
        std::fs::write(
            &policy,
            format!(
                "[users.display]\npassword = \"{}\"\nread = [\"\"]\n\n\
                 [users.camera]\npassword = \"{}\"\nread = [\"camera\"]\nwrite = [\"camera\"]\ncreate = [\"\"]\n",
                hash("disp"),
                hash("cam"),
            ),
        )
        .unwrap();
        let policy = policy.to_str().unwrap();
        let mut node = stampede(&["serve", "--listen", &endpoint, "--access", policy, "--dashboard", "0"], &[]);
        assert_eq!(node.line(|_| true), format!("listening on {endpoint}"));
        let address = dashboard_address(&node);
        for (login, why) in [
            (None, "no credentials"),
            (Some(("display", "wrong")), "a wrong password"),
            (Some(("nobody", "disp")), "an unknown user"),
            (Some(("camera", "cam")), "a user without read on \"\""),
        ] {
            for path in ["/", "/api/snapshot"] {
                let (status, body) = http_get_as(address, path, login);
                assert_eq!(status, 401, "{path} with {why}: {body}");
                assert!(!body.contains("\"node\"") && !body.contains("<html"), "no data with {why}: {body}");
            }
        }
        let camera = stampede::connect_with(
            &endpoint,
            &stampede::ConnectOptions {
                timeout: Some(WAIT),
                user: Some(stampede::Credentials { user: "camera".into(), password: "cam".into() }),
                ..stampede::ConnectOptions::default()
            },
        )
        .unwrap();
        camera.create_channel("camera/left", Limits::items(4)).unwrap();
        let (status, body) = http_get_as(address, "/api/snapshot", Some(("display", "disp")));
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\"name\":\"camera/left\""), "the snapshot shows the node's channels: {body}");

        // A client's dashboard, connected as camera, asks for camera's own login.
        let args = ["dashboard", "--connect", &endpoint, "--user", "camera", "--port", "0"];
        let mut client_dashboard = stampede(&args, &[("STAMPEDE_PASSWORD", "cam")]);
        let client_address = dashboard_address(&client_dashboard);
        for login in [None, Some(("display", "disp")), Some(("camera", "wrong"))] {
            assert_eq!(http_get_as(client_address, "/api/snapshot", login).0, 401, "{login:?}");
        }
        let (status, body) = http_get_as(client_address, "/api/snapshot", Some(("camera", "cam")));
        assert_eq!(status, 200, "{body}");
        assert!(terminate(&mut client_dashboard).success());
        camera.close();
        assert!(terminate(&mut node).success());
    });
}
