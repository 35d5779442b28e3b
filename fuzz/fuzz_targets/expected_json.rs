#![no_main]
//! Fuzzer of `envcraft::fuzz_targets`'s entry `expected_json` (its seeds: `fuzz/seeds/expected_json/`).

use envcraft::fuzz_targets::target;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let entry = target("expected_json").expect("an entry of envcraft::fuzz_targets::TARGETS");
    entry(data);
});
