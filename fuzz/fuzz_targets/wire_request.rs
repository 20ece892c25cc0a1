//! Fuzz target `wire_request`: a client, to a node (what it runs and checks: `stampede_fuzz::TARGETS`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| {
    let target = stampede_fuzz::target("wire_request").expect("the target is in stampede_fuzz::TARGETS");
    (target.run)(input)
});
