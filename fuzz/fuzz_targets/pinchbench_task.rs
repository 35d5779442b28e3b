#![no_main]
//! Fuzzer of `envcraft::fuzz_targets`'s entry `pinchbench_task` (its seeds: `fuzz/seeds/pinchbench_task/`).

use envcraft::fuzz_targets::target;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let entry = target("pinchbench_task").expect("an entry of envcraft::fuzz_targets::TARGETS");
    entry(data);
});
