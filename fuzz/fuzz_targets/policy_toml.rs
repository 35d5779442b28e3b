#![no_main]
//! Fuzzer of `envcraft::fuzz_targets`'s entry `policy_toml` (its seeds: `fuzz/seeds/policy_toml/`).

use envcraft::fuzz_targets::target;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let entry = target("policy_toml").expect("an entry of envcraft::fuzz_targets::TARGETS");
    entry(data);
});
