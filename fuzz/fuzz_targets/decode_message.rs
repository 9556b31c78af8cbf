//! Any bytes given to the message decoder give a message or an error, never a panic; a
//! decoded message re-encodes and decodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofnode_proto::{message_length, Message};

fuzz_target!(|data: &[u8]| {
    // Framing as a stream reader would do it, then the decoder on each frame.
    let mut rest = data;
    while let Some(len) = message_length(rest) {
        if len > rest.len() {
            break;
        }
        let (frame, tail) = rest.split_at(len);
        if let Ok((xid, msg)) = Message::decode(frame) {
            let again = Message::decode(&msg.to_bytes(xid));
            assert_eq!(again, Ok((xid, msg)), "re-encoding changed the message");
        }
        rest = tail;
    }
    let _ = Message::decode(data);
});
