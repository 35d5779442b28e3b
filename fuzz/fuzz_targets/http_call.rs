#![no_main]
//! Fuzzer of `envcraft::fuzz_targets`'s entry `http_call` (its seeds: `fuzz/seeds/http_call/`).

use envcraft::fuzz_targets::target;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let entry = target("http_call").expect("an entry of envcraft::fuzz_targets::TARGETS");
    entry(data);
});
