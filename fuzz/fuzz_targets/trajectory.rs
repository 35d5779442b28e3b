#![no_main]
//! Fuzzer of `envcraft::fuzz_targets`'s entry `trajectory` (its seeds: `fuzz/seeds/trajectory/`).

use envcraft::fuzz_targets::target;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let entry = target("trajectory").expect("an entry of envcraft::fuzz_targets::TARGETS");
    entry(data);
});
