//! Fuzz target `wire_reply`: a node, to a client (what it runs and checks: `stampede_fuzz::TARGETS`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| {
    let target = stampede_fuzz::target("wire_reply").expect("the target is in stampede_fuzz::TARGETS");
    (target.run)(input)
});
