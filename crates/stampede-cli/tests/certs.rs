//! A TLS mesh with users from nothing, as docs/SECURITY.md shows it: `stampede certs` makes the
//! CA and the certificates of two nodes and two users, `stampede hash-password` their policy's
//! hashes, and two `stampede serve` processes (mutual TLS, the policy, one ts_min, only each
//! other's certificates allowed to speak for a node) serve clients who prove themselves with a
//! certificate and a password. A writer on node a and a reader reaching node a through node b
//! share a channel; a user's rights hold across the mesh; a client without a certificate is
//! refused.

use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use stampede::{
    connect_with, ClientTls, ConnectOptions, Container, Credentials, Error, Limits, Runtime, OLDEST_UNSEEN,
};

mod process;
use process::{with_watchdog, Process, WAIT};

/// `stampede <args>`, which must succeed: its standard output.
fn stampede(args: &[&str], stdin: &str) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("stampede starts");
    child.stdin.take().expect("a stdin").write_all(stdin.as_bytes()).expect("writes stdin");
    let output = child.wait_with_output().expect("stampede ends");
    assert!(output.status.success(), "stampede {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("utf-8")
}

/// A TCP port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("its address").port()
}

/// `stampede serve` of node `name` at `endpoint` with the files of `dir`, connecting to `peer`.
fn node(dir: &Path, name: &str, endpoint: &str, peer: Option<&str>) -> Process {
    let file = |f: &str| dir.join(f).display().to_string();
    let mut command = Command::new(env!("CARGO_BIN_EXE_stampede"));
    command.args(["serve", "--name", name, "--listen", endpoint]);
    command.args([
        "--tls-certificate",
        &file(&format!("{name}.pem")),
        "--tls-private-key",
        &file(&format!("{name}.key")),
    ]);
    command.args(["--tls-root-ca", &file("ca.pem"), "--tls-mutual", "--access", &file("policy.toml")]);
    command.args(["--mesh-node-cn", "a", "--mesh-node-cn", "b"]);
    if let Some(peer) = peer {
        command.args(["--connect", peer]);
    }
    let process = Process::spawn(&mut command);
    assert_eq!(process.line(|_| true), format!("listening on {endpoint}"));
    process
}

/// A client of `endpoint` (on `node`) as `user` with `password`, with its certificate or none.
fn client(
    dir: &Path,
    endpoint: &str,
    node: &str,
    user: &str,
    password: &str,
    certificate: bool,
) -> stampede::Result<Runtime> {
    let tls = ClientTls {
        root_ca: Some(dir.join("ca.pem")),
        certificate: certificate.then(|| dir.join(format!("{user}.pem"))),
        private_key: certificate.then(|| dir.join(format!("{user}.key"))),
    };
    let options = ConnectOptions {
        timeout: Some(if certificate { WAIT } else { Duration::from_secs(3) }),
        node: Some(node.to_owned()),
        tls: Some(tls),
        user: Some(Credentials { user: user.to_owned(), password: password.to_owned() }),
        ..ConnectOptions::default()
    };
    connect_with(endpoint, &options)
}

#[test]
fn a_tls_mesh_with_users_starts_from_nothing() {
    with_watchdog("a_tls_mesh_with_users_starts_from_nothing", || {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("certs");
        let dir_arg = dir.display().to_string();
        let made = stampede(
            &[
                "certs",
                "--out",
                &dir_arg,
                "--node",
                "a=127.0.0.1",
                "--node",
                "b=127.0.0.1",
                "--client",
                "camera",
                "--client",
                "display",
            ],
            "",
        );
        assert!(made.contains("made") && made.contains("--mesh-node-cn a --mesh-node-cn b"), "{made}");
        let hash = |password: &str| stampede(&["hash-password"], password).trim().to_owned();
        let policy = format!(
            "[users.camera]\npassword = \"{}\"\ncreate = [\"camera\"]\nwrite = [\"camera\"]\n\n\
             [users.display]\npassword = \"{}\"\nread = [\"camera\"]\n",
            hash("camera-secret"),
            hash("display-secret")
        );
        std::fs::write(dir.join("policy.toml"), policy).unwrap();

        let (a, b) = (format!("tls/127.0.0.1:{}", free_port()), format!("tls/127.0.0.1:{}", free_port()));
        let _a = node(&dir, "a", &a, None);
        let _b = node(&dir, "b", &b, Some(&a));

        let camera = client(&dir, &a, "a", "camera", "camera-secret", true).expect("the camera connects to a");
        let frames = camera.create_channel("camera/frames", Limits::unbounded()).unwrap();
        // The camera's task holds ts_min at 0 while it lives, so the frame waits for its reader.
        let producer = camera.task(0).unwrap();
        producer.attach_output(&frames).unwrap().put(0, &b"frame 0"[..]).unwrap();

        // The display reaches node a through node b: both links are TLS with the certificates made above.
        let display = client(&dir, &b, "a", "display", "display-secret", true).expect("the display connects through b");
        let Container::Channel(seen) = display.lookup("camera/frames").unwrap() else { panic!("a channel") };
        let item = display.task(0).unwrap().attach_input(&seen).unwrap().get(OLDEST_UNSEEN, Some(WAIT)).unwrap();
        assert_eq!(item.data().as_ref(), b"frame 0");
        let refused = display.create_channel("camera/other", Limits::unbounded()).unwrap_err();
        assert!(matches!(refused, Error::PermissionDenied { .. }), "display may only read: {refused:?}");

        let anonymous = client(&dir, &a, "a", "display", "display-secret", false);
        assert!(anonymous.is_err(), "mutual TLS refuses a client without a certificate");
    });
}
