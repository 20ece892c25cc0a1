//! The command line of every benchmark binary: `[--quick]`, plus any options of its own that take
//! a value (`--name value` or `--name=value`), declared by the binary.

/// Options parsed from the command line.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// A tiny smoke run: a few iterations of every case, figures meaningless.
    pub quick: bool,
}

impl Options {
    /// Parses `std::env::args`; exits with a usage message on anything unknown.
    pub fn from_args() -> Options {
        Options::with_values(&[]).0
    }

    /// Parses `std::env::args` like [`from_args`](Self::from_args), also accepting each option
    /// named in `valued` (e.g. `"--csv"`) followed by a value; returns those given, in order.
    /// Exits with a usage message on anything unknown or a missing value.
    pub fn with_values(valued: &[&str]) -> (Options, Vec<(String, String)>) {
        let program = std::env::args().next().unwrap_or_else(|| "bench".into());
        let usage = |problem: String| -> ! {
            let extra: String = valued.iter().map(|name| format!(" [{name} <value>]")).collect();
            eprintln!("{program}: {problem}\nusage: {program} [--quick]{extra}");
            std::process::exit(2);
        };
        let mut options = Options::default();
        let mut values = Vec::new();
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let (name, inline) = match arg.split_once('=') {
                Some((name, value)) if name.starts_with("--") => (name.to_owned(), Some(value.to_owned())),
                _ => (arg.clone(), None),
            };
            match name.as_str() {
                "--quick" if inline.is_none() => options.quick = true,
                // `cargo bench` passes `--bench`; accept it so the binaries can also run that way.
                "--bench" if inline.is_none() => {}
                name if valued.contains(&name) => {
                    let Some(value) = inline.or_else(|| args.next()) else {
                        usage(format!("{name} needs a value"));
                    };
                    values.push((name.to_owned(), value));
                }
                _ => usage(format!("unknown argument {arg:?}")),
            }
        }
        (options, values)
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
