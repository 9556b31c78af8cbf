//! Any text given to the flow parser gives a flow or an error, never a panic; a parsed flow
//! prints to text that parses back to the same flow.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofnode_proto::text::{format_flow_mod, parse_flow};
use ofnode_proto::FlowModCommand;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for cmd in [FlowModCommand::Add, FlowModCommand::Delete] {
        if let Ok(fm) = parse_flow(text, cmd) {
            if cmd == FlowModCommand::Add {
                let printed = format_flow_mod(&fm);
                assert_eq!(parse_flow(&printed, cmd), Ok(fm), "printed: {printed}");
            }
        }
    }
});
