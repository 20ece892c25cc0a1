//! Fuzz target `mcap_recording`: a recording or ROS 2 bag given to replay (what it runs and checks: `stampede_fuzz::TARGETS`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| {
    let target = stampede_fuzz::target("mcap_recording").expect("the target is in stampede_fuzz::TARGETS");
    (target.run)(input)
});
