//! Bytes written as hex in the tests (whitespace ignored), e.g. frames captured from OVS.

/// The bytes of `s`, two hex digits each; whitespace between them is ignored.
pub fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}
