//! What a watcher of the name service sees: the channels and queues under a prefix — first those
//! that exist, then every creation and destruction — and, through a client, the nodes coming up
//! and going down (`stampede`'s `Runtime::watch`). Plain data; the `serde` feature lets a node
//! publish it on the fabric.

/// What a watcher sees.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum WatchEvent {
    /// A channel or queue exists (at the start of the watch) or was created. `container_kind`:
    /// `"channel"` or `"queue"`; `node`: where it lives (`None`: this process).
    Created { name: String, container_kind: String, node: Option<String> },
    /// A channel or queue was destroyed (fields as for `Created`).
    Destroyed { name: String, container_kind: String, node: Option<String> },
    /// A node is reachable (at the start of the watch) or came up.
    NodeUp { node: String },
    /// A node went down (its liveliness token went).
    NodeDown { node: String },
    /// The watcher fell behind by `missed` changes, which are gone; `names()` tells the present.
    Lagged { missed: u64 },
}

impl WatchEvent {
    /// What happened, as every language names it: `"created"`, `"destroyed"`, `"node_up"`,
    /// `"node_down"` or `"lagged"`.
    pub fn kind(&self) -> &'static str {
        match self {
            WatchEvent::Created { .. } => "created",
            WatchEvent::Destroyed { .. } => "destroyed",
            WatchEvent::NodeUp { .. } => "node_up",
            WatchEvent::NodeDown { .. } => "node_down",
            WatchEvent::Lagged { .. } => "lagged",
        }
    }

    /// The container name or node name the event is about (`None` for `Lagged`).
    pub fn subject(&self) -> Option<&str> {
        match self {
            WatchEvent::Created { name, .. } | WatchEvent::Destroyed { name, .. } => Some(name),
            WatchEvent::NodeUp { node } | WatchEvent::NodeDown { node } => Some(node),
            WatchEvent::Lagged { .. } => None,
        }
    }
}
