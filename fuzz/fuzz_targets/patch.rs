#![no_main]
//! Fuzzer of `envcraft::fuzz_targets`'s entry `patch` (its seeds: `fuzz/seeds/patch/`).

use envcraft::fuzz_targets::target;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let entry = target("patch").expect("an entry of envcraft::fuzz_targets::TARGETS");
    entry(data);
});
