//! Any bytes given to the message decoder give a message or an error, never a panic; a
//! decoded message re-encodes and decodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofnode_proto::{message_length, Message, MultipartReply, MultipartReplyBody};

fn has_fixed_strings(msg: &Message) -> bool {
    matches!(
        msg,
        Message::PortStatus(_)
            | Message::MultipartReply(MultipartReply {
                body: MultipartReplyBody::PortDesc(_) | MultipartReplyBody::Desc(_),
                ..
            })
    )
}

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
            if has_fixed_strings(&msg) {
                // Port names and switch descriptions are decoded lossily (invalid UTF-8) and
                // truncated on encode; they must be stable after one round instead.
                let (_, once) = again.expect("re-encoded message does not decode");
                let twice = Message::decode(&once.to_bytes(xid));
                assert_eq!(twice, Ok((xid, once)), "re-encoding is not stable");
            } else {
                assert_eq!(again, Ok((xid, msg)), "re-encoding changed the message");
            }
        }
        rest = tail;
    }
    let _ = Message::decode(data);
});
