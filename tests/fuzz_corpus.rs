//! Replays every kept fuzz corpus file (`fuzz/corpus-kept/<target>/*`) and every checked-in seed
//! through the same checks the fuzz targets run (`ofnode_proto::fuzz_check`,
//! `ofnode::ovsdb::fuzz_decode`), without libFuzzer: what fuzzing once found stays fixed.

use std::path::{Path, PathBuf};

fn inputs(target: &str) -> Vec<PathBuf> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut files = Vec::new();
    for dir in ["corpus-kept", "seeds"] {
        let dir = fuzz.join(dir).join(target);
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
        files.extend(entries.map(|entry| entry.expect("corpus entry").path()));
    }
    files.sort();
    files
}

/// Runs `check` on every input of `target`; names the file that failed.
fn replay(target: &str, check: fn(&[u8])) {
    let files = inputs(target);
    assert!(
        files.len() >= 5,
        "only {} corpus files for {target}: is fuzz/corpus-kept/{target} missing?",
        files.len()
    );
    for file in &files {
        let data = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let outcome = std::panic::catch_unwind(|| check(&data));
        assert!(
            outcome.is_ok(),
            "{target} check failed on {}",
            file.display()
        );
    }
}

#[test]
fn decode_message_corpus_replays() {
    replay(
        "decode_message",
        ofnode_proto::fuzz_check::check_decode_message,
    );
}

#[test]
fn parse_flow_corpus_replays() {
    replay("parse_flow", ofnode_proto::fuzz_check::check_parse_flow);
}

#[test]
fn ovsdb_decode_corpus_replays() {
    replay("ovsdb_decode", ofnode::ovsdb::fuzz_decode);
}
