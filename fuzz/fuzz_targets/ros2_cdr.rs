//! Fuzz target `ros2_cdr`: a ROS 2 message in a bag (what it runs and checks: `stampede_fuzz::TARGETS`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| {
    let target = stampede_fuzz::target("ros2_cdr").expect("the target is in stampede_fuzz::TARGETS");
    (target.run)(input)
});
