//! One name service for the mesh (docs/NODES.md, "The name service"): a fresh client of
//! any node lists, looks up and watches every node's channels and queues — only those its user
//! holds a right on — each watch event naming the node the container lives on.

mod support;

use std::time::Duration;

use stampede::{ConnectOptions, Credentials, Limits, QueueOptions, WatchEvent};
use stampede_node::access::hash_password;
use stampede_node::AccessPolicy;
use support::{eventually, two_nodes, two_nodes_with, with_watchdog, CONNECT_TIMEOUT};

/// Longer than a listing's round to the other nodes, many times over.
const SETTLE: Duration = Duration::from_secs(10);

#[test]
fn a_fresh_client_of_either_node_sees_every_nodes_names() {
    with_watchdog("a_fresh_client_of_either_node_sees_every_nodes_names", || {
        let (a, _b, b_rt, b_dir) = two_nodes();
        a.runtime.create_channel("camera/left", Limits::unbounded()).unwrap();
        b_rt.create_channel("camera/right", Limits::unbounded()).unwrap();
        b_rt.create_queue("jobs", QueueOptions::default()).unwrap();
        let b_endpoint = format!("unixsock-stream/{}", b_dir.path().join("b.sock").display());

        for endpoint in [&a.endpoint, &b_endpoint] {
            let client = stampede::connect(endpoint, Some(CONNECT_TIMEOUT)).unwrap();
            let mut names = Vec::new();
            // Routes between the nodes may still be forming just after they start.
            let all = eventually(SETTLE, || {
                names = client.names("").unwrap();
                names.len() == 3
            });
            assert!(all, "from {endpoint}: {names:?}");
            assert_eq!(names, ["camera/left", "camera/right", "jobs"]);
            assert_eq!(client.names("camera").unwrap(), ["camera/left", "camera/right"]);
            assert!(client.lookup("camera/left").is_ok() && client.lookup("camera/right").is_ok());

            let mut watch = client.watch("", Some(Duration::from_secs(1))).unwrap();
            let mut seen: Vec<(String, String, String)> = (0..3)
                .map(|_| match watch.next_event(Some(SETTLE)).unwrap() {
                    WatchEvent::Created { name, container_kind, node } => (name, container_kind, node.unwrap()),
                    other => panic!("the snapshot's events are creations: {other:?}"),
                })
                .collect();
            seen.sort();
            let expected = [("camera/left", "channel", "a"), ("camera/right", "channel", "b"), ("jobs", "queue", "b")]
                .map(|(n, k, at)| (n.to_owned(), k.to_owned(), at.to_owned()));
            assert_eq!(seen, expected, "from {endpoint}");
            client.close();
        }
    })
}

#[test]
fn every_node_lists_only_what_the_user_may_see() {
    with_watchdog("every_node_lists_only_what_the_user_may_see", || {
        let (camera, display) = (hash_password("cam").unwrap(), hash_password("disp").unwrap());
        let policy = AccessPolicy::parse(&format!(
            "[users.camera]\npassword = \"{camera}\"\ncreate = [\"\"]\nwrite = [\"\"]\n\n\
             [users.display]\npassword = \"{display}\"\nread = [\"camera\"]\n"
        ))
        .unwrap();
        let (a, _b, b_rt, _b_dir) = two_nodes_with(|o| o.access = Some(policy.clone()));
        a.runtime.create_channel("camera/left", Limits::unbounded()).unwrap();
        a.runtime.create_channel("secret/a", Limits::unbounded()).unwrap();
        b_rt.create_channel("camera/right", Limits::unbounded()).unwrap();
        b_rt.create_channel("secret/b", Limits::unbounded()).unwrap();

        let as_user = |user: &str, password: &str| {
            let user = Some(Credentials { user: user.into(), password: password.into() });
            stampede::connect_with(
                &a.endpoint,
                &ConnectOptions { timeout: Some(CONNECT_TIMEOUT), user, ..Default::default() },
            )
            .unwrap()
        };
        let display = as_user("display", "disp");
        let mut names = Vec::new();
        let all = eventually(SETTLE, || {
            names = display.names("").unwrap();
            names.len() >= 2
        });
        assert!(all, "{names:?}");
        assert_eq!(names, ["camera/left", "camera/right"], "b's secret is not listed either");
        let camera = as_user("camera", "cam");
        assert_eq!(camera.names("secret").unwrap(), ["secret/a", "secret/b"], "every right shows a name");
    })
}
