//! The command line of every benchmark binary: `[--quick]`.

/// Options parsed from the command line.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// A tiny smoke run: a few iterations of every case, figures meaningless.
    pub quick: bool,
}

impl Options {
    /// Parses `std::env::args`; exits with a usage message on anything unknown.
    pub fn from_args() -> Options {
        let mut options = Options::default();
        for arg in std::env::args().skip(1) {
            match arg.as_str() {
                "--quick" => options.quick = true,
                // `cargo bench` passes `--bench`; accept it so the binaries can also run that way.
                "--bench" => {}
                other => {
                    let program = std::env::args().next().unwrap_or_else(|| "bench".into());
                    eprintln!("{program}: unknown argument {other:?}\nusage: {program} [--quick]");
                    std::process::exit(2);
                }
            }
        }
        options
    }

    /// `full` normally, `quick` under `--quick`.
    pub fn scale(&self, full: usize, quick: usize) -> usize {
        if self.quick {
            quick
        } else {
            full
        }
    }
}
