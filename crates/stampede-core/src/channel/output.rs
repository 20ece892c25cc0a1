//! An output connection's options: how many of its puts a remote client may have on their way to
//! the node at once (docs/NODES.md, "Pipelined puts").

use crate::error::{Error, Result};

/// Most puts of one output connection on their way to the node at once
/// ([`OutputOptions::put_window`]).
pub const PUT_WINDOW_MAX: usize = 64;

/// An output connection's options (the default: every put waits for the node's reply).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputOptions {
    /// A remote connection sends up to this many puts without waiting for their replies: a
    /// put's error is raised by the connection's next `put` or `flush`, naming the put's
    /// timestamp, and `flush` waits for them all. 0 (the default): every put waits for its
    /// reply. At most [`PUT_WINDOW_MAX`]. An embedded put lands before it returns: there is
    /// nothing to pipeline, and the window changes nothing.
    pub put_window: usize,
}

impl OutputOptions {
    /// Refuses a window above [`PUT_WINDOW_MAX`] (`InvalidArgument` naming the channel).
    pub fn check(&self, name: &str) -> Result<()> {
        if self.put_window > PUT_WINDOW_MAX {
            return Err(Error::InvalidArgument {
                op: "attach_output",
                name: name.to_owned(),
                reason: format!("put_window {} is above PUT_WINDOW_MAX ({PUT_WINDOW_MAX})", self.put_window),
            });
        }
        Ok(())
    }
}
