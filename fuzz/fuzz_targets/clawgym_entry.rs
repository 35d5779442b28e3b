#![no_main]
//! Fuzzer of `envcraft::fuzz_targets`'s entry `clawgym_entry` (its seeds: `fuzz/seeds/clawgym_entry/`).

use envcraft::fuzz_targets::target;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let entry = target("clawgym_entry").expect("an entry of envcraft::fuzz_targets::TARGETS");
    entry(data);
});
