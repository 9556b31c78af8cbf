//! The OVS test-vector files of tests/data/ovs (see regen.py there), read for
//! tests/ovs_vectors.rs (against our codec) and tests/oracle.rs (against ovs-ofctl).

#![allow(dead_code)]

use super::hex::hex;

/// One vector: the input bytes and OVS's verdict (`Ok`: what it prints or re-encodes).
#[derive(Debug)]
pub struct Vector {
    pub symbolic: Option<String>,
    /// The line ovs-ofctl printed, where it differs from the verdict's form (matches).
    pub ovs_line: Option<String>,
    pub input: Vec<u8>,
    pub verdict: Result<String, String>,
}

/// Reads a vector file: `< symbolic` (optional), `> hex`, then `= result` or `! ERROR`.
pub fn read_vectors(path: &str) -> Vec<Vector> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut out = Vec::new();
    let mut symbolic = None;
    let mut input = None;
    for line in text.lines() {
        if let Some(s) = line.strip_prefix("< ") {
            symbolic = Some(s.to_string());
        } else if let Some(l) = line.strip_prefix("~ ") {
            if let Some(last) = out.last_mut() {
                let last: &mut Vector = last;
                last.ovs_line = Some(l.to_string());
            }
        } else if let Some(h) = line.strip_prefix("> ") {
            input = Some(hex(h));
        } else if let Some(v) = line.strip_prefix("= ").or(line.strip_prefix("! ")) {
            let verdict = if line.starts_with('=') {
                Ok(v.to_string())
            } else {
                Err(v.to_string())
            };
            out.push(Vector {
                symbolic: symbolic.take(),
                ovs_line: None,
                input: input.take().expect("a verdict follows its input"),
                verdict,
            });
        }
    }
    out
}

/// The path of a vector file.
pub fn data(name: &str) -> String {
    format!("{}/tests/data/ovs/{name}", env!("CARGO_MANIFEST_DIR"))
}
