//! Fuzz target `viewer_message`: a Foxglove viewer, or a browser's login (what it runs and checks: `stampede_fuzz::TARGETS`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| {
    let target = stampede_fuzz::target("viewer_message").expect("the target is in stampede_fuzz::TARGETS");
    (target.run)(input)
});
