//! The `stampede` command: the library's [`stampede_cli::run`] on this process's arguments.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(stampede_cli::run(std::env::args_os()))
}
