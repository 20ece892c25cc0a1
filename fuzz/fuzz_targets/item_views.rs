//! Fuzz target `item_views`: any putter's item, drawn by the dashboard or Foxglove (what it runs and checks: `stampede_fuzz::TARGETS`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| {
    let target = stampede_fuzz::target("item_views").expect("the target is in stampede_fuzz::TARGETS");
    (target.run)(input)
});
