#![no_main]
//! Durations and CPU lists: parsing arbitrary input never panics, and what parses round-trips.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    latlab_model::units::fuzz_check(data);
});
