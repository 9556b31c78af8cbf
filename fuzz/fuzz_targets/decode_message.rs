//! Any bytes given to the message decoder give a message or an error, never a panic; a
//! decoded message re-encodes and decodes to itself (`ofnode_proto::fuzz_check`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ofnode_proto::fuzz_check::check_decode_message(data);
});
