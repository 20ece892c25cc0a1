//! Fuzz target `engine_ops`: a client's operations, run by a node's engine (what it runs and checks: `stampede_fuzz::TARGETS`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| {
    let target = stampede_fuzz::target("engine_ops").expect("the target is in stampede_fuzz::TARGETS");
    (target.run)(input)
});
