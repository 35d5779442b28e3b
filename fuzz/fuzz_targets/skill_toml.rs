#![no_main]
//! Fuzzer of `envcraft::fuzz_targets`'s entry `skill_toml` (its seeds: `fuzz/seeds/skill_toml/`).

use envcraft::fuzz_targets::target;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let entry = target("skill_toml").expect("an entry of envcraft::fuzz_targets::TARGETS");
    entry(data);
});
