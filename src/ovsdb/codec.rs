//! JSON-RPC 1.0 framing for OVSDB (RFC 7047 §4), sans-IO: bytes in, messages out.
//!
//! OVSDB sends JSON texts back to back with no length prefix, so a message ends where its JSON
//! value ends. serde_json's `StreamDeserializer` finds that end (string escapes included) and
//! `byte_offset()` says how much of the buffer the value used. A read may hold half a message or
//! several; whatever is incomplete stays buffered until more bytes arrive, up to a size limit.

use bytes::{Buf, BytesMut};
use serde_json::{json, Map, Value};

/// The default upper bound on one message (the initial monitor reply is the largest).
pub const DEFAULT_MAX_MESSAGE: usize = 64 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("a JSON-RPC message exceeds the {limit}-byte limit ({buffered} bytes buffered)")]
    TooLarge { limit: usize, buffered: usize },
    #[error("invalid JSON from the peer at line {line} column {column}: {reason}")]
    Syntax {
        line: usize,
        column: usize,
        reason: String,
    },
    #[error("not a JSON-RPC message ({reason}): {found}")]
    NotJsonRpc { reason: &'static str, found: String },
}

/// One JSON-RPC 1.0 message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A call that wants an answer with the same `id` (the server sends `echo` this way).
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A call with `"id": null` (the server sends monitor `update`s this way).
    Notification { method: String, params: Value },
    /// An answer: `error` is `null` on success, `result` is `null` on failure.
    Response {
        id: Value,
        result: Value,
        error: Value,
    },
}

impl Message {
    pub fn to_json(&self) -> Value {
        match self {
            Message::Request { id, method, params } => {
                json!({"id": id, "method": method, "params": params})
            }
            Message::Notification { method, params } => {
                json!({"id": null, "method": method, "params": params})
            }
            Message::Response { id, result, error } => {
                json!({"id": id, "result": result, "error": error})
            }
        }
    }

    pub fn from_json(value: Value) -> Result<Message, CodecError> {
        let Value::Object(mut object) = value else {
            return Err(not_json_rpc("not an object", &value));
        };
        if let Some(method) = object.remove("method") {
            return call_from_parts(method, object);
        }
        if object.contains_key("result") || object.contains_key("error") {
            let id = object.remove("id").unwrap_or(Value::Null);
            if id.is_null() {
                return Err(not_json_rpc(
                    "response without an id",
                    &Value::Object(object),
                ));
            }
            return Ok(Message::Response {
                id,
                result: object.remove("result").unwrap_or(Value::Null),
                error: object.remove("error").unwrap_or(Value::Null),
            });
        }
        Err(not_json_rpc(
            "neither a call nor a response",
            &Value::Object(object),
        ))
    }

    /// Appends the message's JSON text to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        // Writing a `Value` into a Vec cannot fail: keys are strings and numbers are finite.
        let _ = serde_json::to_writer(&mut *out, &self.to_json());
    }
}

fn call_from_parts(method: Value, mut object: Map<String, Value>) -> Result<Message, CodecError> {
    let Value::String(method) = method else {
        return Err(not_json_rpc("method is not a string", &method));
    };
    let params = object.remove("params").unwrap_or(Value::Array(Vec::new()));
    match object.remove("id").unwrap_or(Value::Null) {
        Value::Null => Ok(Message::Notification { method, params }),
        id => Ok(Message::Request { id, method, params }),
    }
}

fn not_json_rpc(reason: &'static str, found: &Value) -> CodecError {
    let mut text = found.to_string();
    if text.len() > 200 {
        let cut = (0..=200)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push('…');
    }
    CodecError::NotJsonRpc {
        reason,
        found: text,
    }
}

/// Splits a byte stream into messages.
///
/// serde_json decides where a message ends, but running it over the whole buffer after every
/// read would make a large message cost O(n²) (a 650 kB monitor reply arriving in 8 kB reads
/// took 2.5 s). So a small scanner follows the nesting depth of the buffered bytes (skipping
/// string contents and escapes) and serde_json runs only once the outermost `{…}` or `[…]` has
/// closed. The scanner only decides *when* to parse; serde_json still does all the parsing.
#[derive(Debug, Clone)]
pub struct Decoder {
    max_message: usize,
    scan: Scan,
}

/// How far the buffered bytes have been scanned, and the state there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Scan {
    scanned: usize,
    depth: usize,
    in_string: bool,
    escaped: bool,
}

impl Scan {
    /// Scans new bytes; true once a complete top-level value may be in the buffer.
    fn value_may_be_complete(&mut self, buf: &[u8]) -> bool {
        while let Some(&byte) = buf.get(self.scanned) {
            self.scanned += 1;
            if self.in_string {
                match (self.escaped, byte) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match byte {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return true;
                    }
                }
                // Anything else outside a container (a scalar or garbage) is serde_json's to judge.
                _ if self.depth == 0 && !byte.is_ascii_whitespace() => return true,
                _ => {}
            }
        }
        false
    }
}

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder::new(DEFAULT_MAX_MESSAGE)
    }
}

impl Decoder {
    pub fn new(max_message: usize) -> Decoder {
        Decoder {
            max_message,
            scan: Scan::default(),
        }
    }

    /// Takes the next complete message off the front of `buf`; `Ok(None)` when `buf` holds only
    /// part of one (or only whitespace). `buf` must be the same buffer on every call, with new
    /// bytes appended. Errors are fatal for the stream: after invalid JSON there is no way to
    /// find where the next message starts.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Message>, CodecError> {
        if !self.scan.value_may_be_complete(buf) {
            if self.scan.depth == 0 && !self.scan.in_string {
                // Everything scanned is whitespace between messages.
                buf.clear();
                self.scan = Scan::default();
            }
            if buf.len() > self.max_message {
                return Err(self.too_large(buf.len()));
            }
            return Ok(None);
        }
        let mut stream = serde_json::Deserializer::from_slice(buf).into_iter::<Value>();
        match stream.next() {
            None => {
                // Only whitespace: nothing can start before the next byte arrives.
                buf.clear();
                self.scan = Scan::default();
                Ok(None)
            }
            Some(Ok(value)) => {
                let used = stream.byte_offset();
                if used > self.max_message {
                    return Err(self.too_large(used));
                }
                buf.advance(used);
                self.scan = Scan::default();
                Message::from_json(value).map(Some)
            }
            Some(Err(err)) if err.is_eof() => {
                if buf.len() > self.max_message {
                    return Err(self.too_large(buf.len()));
                }
                Ok(None)
            }
            Some(Err(err)) => Err(CodecError::Syntax {
                line: err.line(),
                column: err.column(),
                reason: err.to_string(),
            }),
        }
    }

    fn too_large(&self, buffered: usize) -> CodecError {
        CodecError::TooLarge {
            limit: self.max_message,
            buffered,
        }
    }
}

/// The fuzz target's body: decodes `data` as a stream fed in two chunks (the split point comes
/// from the data), interprets every message the way the client would, and checks that chunking
/// does not change the result. Must never panic on any input.
pub fn fuzz_decode(data: &[u8]) {
    let split = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    let whole = decode_all(&[data]);
    let chunked = decode_all(&[&data[..split], &data[split..]]);
    assert_eq!(whole, chunked, "chunking changed what was decoded");
    for message in whole.0 {
        interpret(&message);
    }
}

/// Every message a sequence of reads yields, and whether an error stopped the stream. Which
/// error it was may depend on chunking (a top-level `1` then `a` is "not JSON-RPC" when read
/// apart and a syntax error when read together), so only its presence is compared.
fn decode_all(reads: &[&[u8]]) -> (Vec<Message>, bool) {
    const FUZZ_LIMIT: usize = 1 << 16;
    let mut decoder = Decoder::new(FUZZ_LIMIT);
    let mut buf = BytesMut::new();
    let mut messages = Vec::new();
    for read in reads {
        buf.extend_from_slice(read);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(message)) => messages.push(message),
                Ok(None) => break,
                Err(_) => return (messages, true),
            }
        }
    }
    (messages, false)
}

/// What the client does with a decoded message, minus the I/O.
fn interpret(message: &Message) {
    let mut encoded = Vec::new();
    message.encode(&mut encoded);
    let mut buf = BytesMut::from(&encoded[..]);
    let again = Decoder::default().decode(&mut buf);
    assert!(
        matches!(&again, Ok(Some(m)) if m == message),
        "re-encoding changed {message:?} into {again:?}"
    );
    match message {
        Message::Notification { params, .. } => {
            if let Some(updates) = params.get(1) {
                let _ = super::monitor::parse_table_updates(updates);
            }
        }
        Message::Response { result, .. } => {
            let _ = super::txn::parse_results(3, result);
            let _ = super::monitor::parse_table_updates(result);
        }
        Message::Request { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_reads(reads: &[&[u8]]) -> Vec<Message> {
        let (messages, failed) = decode_all(reads);
        assert!(!failed);
        messages
    }

    const ECHO: &[u8] = br#"{"id":"echo","method":"echo","params":[]}"#;
    const UPDATE: &[u8] = br#"{"id":null,"method":"update","params":["m",{"Bridge":{}}]} "#;
    const REPLY: &[u8] = br#"{"id":7,"result":[{"count":1}],"error":null}"#;

    #[test]
    fn several_messages_in_one_read() {
        let all = [ECHO, UPDATE, REPLY].concat();
        let messages = decode_reads(&[&all]);
        assert_eq!(messages.len(), 3);
        assert!(matches!(&messages[0], Message::Request { method, .. } if method == "echo"));
        assert!(matches!(&messages[1], Message::Notification { method, .. } if method == "update"));
        assert!(matches!(&messages[2], Message::Response { id, .. } if id == 7));
    }

    #[test]
    fn any_split_point_gives_the_same_messages() {
        let all = [ECHO, b"\n", UPDATE, REPLY].concat();
        let expected = decode_reads(&[&all]);
        for split in 0..=all.len() {
            assert_eq!(
                decode_reads(&[&all[..split], &all[split..]]),
                expected,
                "split {split}"
            );
        }
        let bytes: Vec<&[u8]> = all.chunks(1).collect();
        assert_eq!(decode_reads(&bytes), expected);
    }

    #[test]
    fn braces_inside_strings_do_not_end_a_message() {
        let tricky = br#"{"id":1,"result":["}\"{", "\\", "]\\\"]"],"error":null} {"id":2,"result":[],"error":null}"#;
        for split in 0..=tricky.len() {
            let messages = decode_reads(&[&tricky[..split], &tricky[split..]]);
            assert_eq!(messages.len(), 2, "split {split}");
            let Message::Response { result, .. } = &messages[0] else {
                panic!("not a response: {messages:?}")
            };
            assert_eq!(result, &json!(["}\"{", "\\", "]\\\"]"]));
        }
    }

    #[test]
    fn oversized_message_is_an_error_not_a_buffer_that_grows() {
        let mut decoder = Decoder::new(16);
        let mut buf = BytesMut::from(&br#"{"id":1,"result":"0123456789"#[..]);
        assert!(matches!(
            decoder.decode(&mut buf),
            Err(CodecError::TooLarge { limit: 16, .. })
        ));
    }

    #[test]
    fn garbage_is_a_syntax_error() {
        let mut buf = BytesMut::from(&b"{\"id\":1,]"[..]);
        assert!(matches!(
            Decoder::default().decode(&mut buf),
            Err(CodecError::Syntax { .. })
        ));
    }

    #[test]
    fn non_rpc_json_is_rejected() {
        for text in [
            &b"[1,2]"[..],
            b"{\"id\":1}",
            b"{\"result\":1,\"id\":null}",
            b"{\"method\":1}",
        ] {
            let mut buf = BytesMut::from(text);
            assert!(
                matches!(
                    Decoder::default().decode(&mut buf),
                    Err(CodecError::NotJsonRpc { .. })
                ),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn encode_then_decode_is_identity() {
        let message = Message::Request {
            id: json!(3),
            method: "transact".into(),
            params: json!(["Open_vSwitch", {"op": "comment", "comment": "é \" }"}]),
        };
        let mut out = Vec::new();
        message.encode(&mut out);
        assert_eq!(decode_reads(&[&out]), vec![message]);
    }

    #[test]
    fn fuzz_body_accepts_samples() {
        fuzz_decode(&[ECHO, UPDATE, REPLY].concat());
        fuzz_decode(b"\x05{\"id\":1,\"result\":[{\"error\":\"x\"}],\"error\":null}");
        fuzz_decode(b"");
        fuzz_decode(b"\xff\xfe");
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn fuzz_body_never_panics(data in proptest::collection::vec(any::<u8>(), 0..512)) {
                fuzz_decode(&data);
            }

            #[test]
            fn fuzz_body_never_panics_on_near_json(
                parts in proptest::collection::vec(
                    prop_oneof![
                        Just(&b"{"[..]), Just(&b"}"[..]), Just(&b"["[..]), Just(&b"]"[..]),
                        Just(&b"\""[..]), Just(&b"\\"[..]), Just(&b","[..]), Just(&b":"[..]),
                        Just(&b"\"id\":1"[..]), Just(&b"\"method\":\"update\""[..]),
                        Just(&b"\"params\":[\"m\",{\"Port\":{}}]"[..]), Just(&b"\"result\":"[..]),
                        Just(&b"\"error\":null"[..]), Just(&b"[\"uuid\",\"x\"]"[..]),
                        Just(&b"null"[..]), Just(&b"1e999"[..]), Just(&b" "[..]),
                    ],
                    0..40,
                )
            ) {
                fuzz_decode(&parts.concat());
            }

            #[test]
            fn any_strings_survive_any_chunking(
                texts in proptest::collection::vec(any::<String>(), 1..6),
                cut in any::<proptest::sample::Index>(),
            ) {
                let mut stream = Vec::new();
                let sent: Vec<Message> = texts
                    .iter()
                    .enumerate()
                    .map(|(i, text)| Message::Notification {
                        method: text.clone(),
                        params: json!([i, {text.clone(): [text, "}", "\\\""]}]),
                    })
                    .collect();
                for message in &sent {
                    message.encode(&mut stream);
                }
                let cut = cut.index(stream.len() + 1);
                prop_assert_eq!(decode_reads(&[&stream[..cut], &stream[cut..]]), sent.clone());
                let bytes: Vec<&[u8]> = stream.chunks(7).collect();
                prop_assert_eq!(decode_reads(&bytes), sent);
            }

            #[test]
            fn chunked_stream_equals_whole_stream(
                ids in proptest::collection::vec(0u32..1000, 1..8),
                cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..6),
            ) {
                let mut stream = Vec::new();
                for id in &ids {
                    Message::Response { id: json!(id), result: json!([{"count": id}]), error: Value::Null }
                        .encode(&mut stream);
                    stream.push(b'\n');
                }
                let mut points: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
                points.sort_unstable();
                let mut reads = Vec::new();
                let mut start = 0;
                for p in points {
                    reads.push(&stream[start..p]);
                    start = p;
                }
                reads.push(&stream[start..]);
                let messages = decode_reads(&reads);
                prop_assert_eq!(messages.len(), ids.len());
            }
        }
    }
}
