//! Fuzz target `npy_header`: a put's .npy payload (what it runs and checks: `stampede_fuzz::TARGETS`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| {
    let target = stampede_fuzz::target("npy_header").expect("the target is in stampede_fuzz::TARGETS");
    (target.run)(input)
});
