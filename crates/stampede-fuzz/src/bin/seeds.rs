//! Writes every target's seeds into its corpus directory (`fuzz/corpus/<target>/`, or under the
//! directory given) as `seed-<n>`, replacing those written before (the fuzzer names what it keeps
//! by hash, so the two never meet).

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let root = std::env::args_os().nth(1).map(PathBuf::from).unwrap_or_else(|| "fuzz/corpus".into());
    for target in stampede_fuzz::TARGETS {
        let dir = root.join(target.name);
        std::fs::create_dir_all(&dir)?;
        let seeds = stampede_fuzz::seeds::of(target.name);
        for (n, seed) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{n}")), seed)?;
        }
        println!("{:<16} {} seeds in {}", target.name, seeds.len(), dir.display());
    }
    Ok(())
}
