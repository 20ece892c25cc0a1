//! Fuzz target `trace_log`: a process's trace log file (what it runs and checks: `stampede_fuzz::TARGETS`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| {
    let target = stampede_fuzz::target("trace_log").expect("the target is in stampede_fuzz::TARGETS");
    (target.run)(input)
});
