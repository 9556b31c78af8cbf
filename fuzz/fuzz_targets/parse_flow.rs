//! Any text given to the flow parser gives a flow or an error, never a panic; a parsed flow
//! prints to text that parses back to the same flow (`ofnode_proto::fuzz_check`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ofnode_proto::fuzz_check::check_parse_flow(data);
});
