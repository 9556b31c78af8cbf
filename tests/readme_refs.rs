//! The README's promises name the tests that show them (`file::test_name`, and
//! `…other_test` for another test of the same file). A promise whose test was renamed or
//! removed would still read as shown; this test fails instead. It checks every reference to an
//! integration test file (tests/*.rs, proto/tests/*.rs): the file exists and defines the test,
//! and every `…name` that follows one on the same line is a test of that file.

use std::path::{Path, PathBuf};

/// One backticked reference: `file::name`, or `…name` (another test of the last file named).
#[derive(Debug, PartialEq)]
enum Reference {
    Qualified {
        file: String,
        name: String,
    },
    Sibling(String),
    /// Prose between spans that starts a new line: a `…name` after it has no file.
    LineBreak,
}

/// The README's test references, in order, with the line breaks between them.
fn test_references(readme: &str) -> Vec<Reference> {
    let mut references = Vec::new();
    for (i, segment) in readme.split('`').enumerate() {
        if i % 2 == 0 {
            if segment.contains('\n') {
                references.push(Reference::LineBreak);
            }
            continue;
        }
        for span in segment.split(", ").map(str::trim) {
            if span.contains(' ') {
                continue;
            }
            if let Some(name) = span.strip_prefix('…') {
                if is_test_name(name) {
                    references.push(Reference::Sibling(name.to_string()));
                }
            } else if let Some((file, name)) = span.split_once("::") {
                references.push(Reference::Qualified {
                    file: file.to_string(),
                    name: name.to_string(),
                });
            }
        }
    }
    references
}

fn is_test_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
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

/// How many test references `readme` makes, and the ones that name no test.
fn check(root: &Path, readme: &str) -> (usize, Vec<String>) {
    let mut last_file: Option<PathBuf> = None;
    let mut checked = 0;
    let mut missing = Vec::new();
    for reference in test_references(readme) {
        let (path, name) = match reference {
            Reference::LineBreak => {
                last_file = None;
                continue;
            }
            Reference::Sibling(name) => match &last_file {
                Some(path) => (path.clone(), name),
                None => {
                    missing.push(format!("`…{name}` follows no test file on its line"));
                    continue;
                }
            },
            Reference::Qualified { file, name } => {
                // `path::to::item` of a crate, `Type::method`, …: not a test file.
                let (Some(path), false) = (test_file(root, &file), name.contains("::")) else {
                    last_file = None;
                    continue;
                };
                last_file = Some(path.clone());
                (path, name)
            }
        };
        if !is_test_name(&name) {
            continue;
        }
        checked += 1;
        if !defines(&path, &name) {
            missing.push(format!("{} has no test {name}", path.display()));
        }
    }
    (checked, missing)
}

#[test]
fn every_test_the_readme_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let (checked, missing) = check(root, &readme);
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

/// The checker itself: a wrong name is reported whether it is qualified or follows `…`, and a
/// `…name` belongs to the file named before it on its own line only.
#[test]
fn a_wrong_name_is_reported_in_either_form() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = "| row | `readme_refs::every_test_the_readme_names_exists`, \
                `…a_wrong_name_is_reported_in_either_form`, `…no_such_test` |\n\
                | next | `readme_refs::no_such_test_either` |\n\
                | orphan | `…every_test_the_readme_names_exists` |\n";
    let (checked, missing) = check(root, text);
    assert_eq!(checked, 4, "{missing:?}");
    let file = root.join("tests/readme_refs.rs");
    assert_eq!(
        missing,
        [
            format!("{} has no test no_such_test", file.display()),
            format!("{} has no test no_such_test_either", file.display()),
            "`…every_test_the_readme_names_exists` follows no test file on its line".to_string(),
        ]
    );
}
