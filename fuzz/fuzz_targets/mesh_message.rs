//! Fuzz target `mesh_message`: a node, to the other nodes of its mesh (what it runs and checks: `stampede_fuzz::TARGETS`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| {
    let target = stampede_fuzz::target("mesh_message").expect("the target is in stampede_fuzz::TARGETS");
    (target.run)(input)
});
