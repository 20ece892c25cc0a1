//! The embedded backend: channels, queues and tasks in this process, over [`crate::space`]'s
//! state. The public types forward here when their runtime is embedded ([`crate::Runtime::new`]).

pub(crate) mod channel;
pub(crate) mod graph;
pub(crate) mod queue;
pub(crate) mod runtime;
pub(crate) mod task;
