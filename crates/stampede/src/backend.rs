//! Which runtime a handle belongs to: this process's ([`stampede_engine`]) or a node's through the
//! fabric ([`crate::remote`]). Every public type holds a [`Backend`] and forwards each call to
//! the same-named method of its side, so one API serves both (location transparency: docs/NODES.md,
//! "Embedded by default, one API everywhere").

/// The embedded form `L` or the remote form `R` of a public type.
#[derive(Clone)]
pub(crate) enum Backend<L, R> {
    Local(L),
    // Without the `remote` feature its value cannot exist (`R` is `Never`).
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    Remote(R),
}

/// The remote form of every type in a build without the `remote` feature: there is none, so no
/// value of `Backend::Remote` exists and its arms are never taken.
#[cfg(not(feature = "remote"))]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Never {}

/// Runs `$body` with `$x` bound to whichever side `$backend` holds (both sides have the method).
macro_rules! forward {
    ($backend:expr, $x:ident => $body:expr) => {
        match $backend {
            $crate::backend::Backend::Local($x) => $body,
            $crate::backend::Backend::Remote($x) => $crate::backend::remote!($x => $body),
        }
    };
}

/// The body of a `Backend::Remote` arm that binds `$x` (and `$y`s): `$body` with the `remote`
/// feature; without it the arm cannot be taken (`$x` is a [`Never`]), and `$body` is not
/// compiled.
#[cfg(feature = "remote")]
macro_rules! remote {
    ($x:ident $(, $y:ident)* => $body:expr) => {
        $body
    };
}
#[cfg(not(feature = "remote"))]
macro_rules! remote {
    ($x:ident $(, $y:ident)* => $body:expr) => {{
        $(let _ = $y;)*
        match *$x {}
    }};
}

pub(crate) use {forward, remote};
