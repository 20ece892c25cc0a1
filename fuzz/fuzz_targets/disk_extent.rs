//! Fuzz target `disk_extent`: the disk tier's extent files (what it runs and checks: `stampede_fuzz::TARGETS`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| {
    let target = stampede_fuzz::target("disk_extent").expect("the target is in stampede_fuzz::TARGETS");
    (target.run)(input)
});
