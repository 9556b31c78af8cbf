//! The README's promises name the tests that show them (`file::test_name`, and
//! `…other_test` for another test of the same file). A promise whose test was renamed or
//! removed would still read as shown; this test fails instead. It checks every reference to an
//! integration test file (tests/*.rs, proto/tests/*.rs): the file exists and defines the test.

use std::path::{Path, PathBuf};

/// The backticked spans of the README that look like `file::name`.
fn test_references(readme: &str) -> Vec<String> {
    readme
        .split('`')
        .skip(1)
        .step_by(2)
        .flat_map(|span| span.split(", "))
        .map(str::trim)
        .filter(|span| span.contains("::") && !span.contains(' '))
        .map(String::from)
        .collect()
}

/// The test file a reference's first segment names, if it is an integration test file.
fn test_file(root: &Path, file: &str) -> Option<PathBuf> {
    ["tests", "proto/tests"]
        .iter()
        .map(|dir| root.join(dir).join(format!("{file}.rs")))
        .find(|path| path.is_file())
}

/// Whether `source` (or a module file beside it) defines `fn name`.
fn defines(path: &Path, name: &str) -> bool {
    let needle = format!("fn {name}(");
    let in_file = |p: &Path| std::fs::read_to_string(p).is_ok_and(|s| s.contains(&needle));
    if in_file(path) {
        return true;
    }
    // A test file split into modules: tests/NAME/*.rs.
    let dir = path.with_extension("");
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|entry| in_file(&entry.path()))
}

#[test]
fn every_test_the_readme_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let mut last_file: Option<PathBuf> = None;
    let mut checked = 0;
    let mut missing = Vec::new();
    for reference in test_references(&readme) {
        let (path, name) = match reference.strip_prefix('…') {
            Some(name) => match &last_file {
                Some(path) => (path.clone(), name.to_string()),
                None => continue,
            },
            None => {
                let mut parts = reference.split("::");
                let (Some(file), Some(name), None) = (parts.next(), parts.next(), parts.next())
                else {
                    last_file = None;
                    continue;
                };
                let Some(path) = test_file(root, file) else {
                    last_file = None;
                    continue;
                };
                last_file = Some(path.clone());
                (path, name.to_string())
            }
        };
        let name = name.trim_start_matches('…');
        if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.is_empty() {
            checked += 1;
            if !defines(&path, name) {
                missing.push(format!("{} has no test {name}", path.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "README names tests that do not exist:\n{}",
        missing.join("\n")
    );
    // The README's fault table alone names dozens; far fewer means the parsing broke.
    assert!(
        checked > 30,
        "only {checked} test references found in README.md"
    );
}
