//! Which runtime a handle belongs to: this process's ([`stampede_engine`]) or a node's through the
//! fabric ([`crate::remote`]). Every public type holds a [`Backend`] and forwards each call to
//! the same-named method of its side, so one API serves both (location transparency: docs/NODES.md,
//! "Embedded by default, one API everywhere").

/// The embedded form `L` or the remote form `R` of a public type.
#[derive(Clone)]
pub(crate) enum Backend<L, R> {
    Local(L),
    Remote(R),
}

/// Runs `$body` with `$x` bound to whichever side `$backend` holds (both sides have the method).
macro_rules! forward {
    ($backend:expr, $x:ident => $body:expr) => {
        match $backend {
            $crate::backend::Backend::Local($x) => $body,
            $crate::backend::Backend::Remote($x) => $body,
        }
    };
}

pub(crate) use forward;
