//! Any bytes given to the OVSDB JSON-RPC decoder give messages or an error, never a panic; the
//! result does not depend on how the bytes are split into reads; every decoded message
//! re-encodes to itself and its table-updates / transact results parse or fail cleanly.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ofnode::ovsdb::fuzz_decode(data);
});
