//! Fuzz target `c_api`: a C program's pointers, lengths, strings and numbers (what it runs and checks: `stampede_fuzz::TARGETS`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| {
    let target = stampede_fuzz::target("c_api").expect("the target is in stampede_fuzz::TARGETS");
    (target.run)(input)
});
