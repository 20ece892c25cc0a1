//! `_cli(argv)`: the `stampede` command line run in this process — what the wheel's `stampede`
//! console script (`python/stampede/_cli.py`) calls, so that the command comes with the package
//! without a binary of its own. The GIL is released while it runs (a node serves until a signal).

use std::ffi::OsString;

use pyo3::prelude::*;

/// Runs the command line `argv` (the program's name first) to its end; its exit status.
#[pyfunction]
pub fn _cli(py: Python<'_>, argv: Vec<OsString>) -> u8 {
    py.detach(|| stampede_cli::run(argv))
}
