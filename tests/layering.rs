//! The node controller's modules form layers: no module of `src/sdn` imports one that
//! imports it back, directly or through others (docs/architecture.md draws the layers), and
//! the pure core (`src/sdn/core`) names no peer (OVSDB, OpenFlow, netlink) and no tokio. No
//! circle either among the actions and the text syntax of `proto` (`proto/src/action`,
//! `text`). The graph is read from the sources' paths (`crate::sdn::x`, `super::x`), test
//! code left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The text of a source without its inline test module and without comments.
fn code(text: &str) -> String {
    let text = text
        .split("#[cfg(test)]\nmod tests {")
        .next()
        .unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules of a tree (`src/sdn`, reached from the crate root as `from_crate`,
/// e.g. `crate::sdn::`) a file of module `own` refers to. `depth` is how many `super::` lead
/// from the file to the tree's root (1 for `sdn/x.rs` and `sdn/x/mod.rs`, 2 for `sdn/x/y.rs`,
/// …).
fn references(
    text: &str,
    from_crate: &str,
    own: &str,
    depth: usize,
    modules: &BTreeSet<String>,
) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let to_root = "super::".repeat(depth);
    for prefix in [from_crate.to_string(), to_root] {
        let mut rest = text;
        while let Some(at) = rest.find(&prefix) {
            let after = &rest[at + prefix.len()..];
            // A longer run of `super::` than the prefix leaves `src/sdn`: not ours.
            let is_deeper = prefix.starts_with("super") && rest[..at].ends_with("super::");
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !is_deeper && name != own && modules.contains(&name) {
                found.insert(name);
            }
            rest = after;
        }
    }
    found
}

/// Module → the modules it refers to, for the tree at `root` (the crate reaches it as
/// `from_crate`).
fn graph(root: &Path, from_crate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = std::fs::read_dir(root)
        .expect("the tree's directory")
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let name = path.file_stem()?.to_str()?.to_string();
            (name != "mod").then_some(name)
        })
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in sources(root) {
        let relative = file.strip_prefix(root).expect("under the tree");
        let parts: Vec<&str> = relative.iter().filter_map(|p| p.to_str()).collect();
        if parts == ["mod.rs"] || parts.iter().any(|p| *p == "tests" || *p == "tests.rs") {
            continue;
        }
        let own = parts[0].trim_end_matches(".rs").to_string();
        let in_dir = parts.len() - 1;
        let depth = if parts.last() == Some(&"mod.rs") {
            in_dir
        } else {
            in_dir + 1
        };
        let text = code(&std::fs::read_to_string(&file).expect("readable source"));
        edges
            .entry(own.clone())
            .or_default()
            .extend(references(&text, from_crate, &own, depth, &modules));
    }
    edges
}

/// The modules on a cycle, if any (depth-first search for a back edge).
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|start| visit(start, edges, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_of_the_node_controller_imports_one_that_imports_it_back() {
    let sdn = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/sdn");
    let edges = graph(&sdn, "crate::sdn::");
    assert!(edges.len() > 20, "the sources were read: {edges:?}");
    assert!(
        edges["core"].contains("store") && edges["store"].contains("state"),
        "the graph sees both path forms: {edges:?}"
    );
    if let Some(cycle) = cycle(&edges) {
        panic!("a circle of imports in src/sdn: {}", cycle.join(" -> "));
    }
}

#[test]
fn a_circle_is_found() {
    let edge = |a: &str, b: &str| (a.to_string(), BTreeSet::from([b.to_string()]));
    let circle = BTreeMap::from([edge("a", "b"), edge("b", "c"), edge("c", "a")]);
    assert_eq!(cycle(&circle).map(|c| c.len()), Some(4));
    let line = BTreeMap::from([edge("a", "b"), edge("b", "c")]);
    assert_eq!(cycle(&line), None);
    let modules: BTreeSet<String> = ["core", "store"].iter().map(|s| s.to_string()).collect();
    let found = references(
        "use super::super::store::X; use super::core::Y;",
        "crate::sdn::",
        "policy",
        2,
        &modules,
    );
    assert_eq!(
        found,
        BTreeSet::from(["store".to_string()]),
        "super::core is a sibling in policy/"
    );
}

#[test]
fn the_actions_and_the_text_of_proto_import_no_circle() {
    let proto = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto/src");
    for (tree, a, b) in [("action", "ct", "nat"), ("text", "parse", "error")] {
        let edges = graph(&proto.join(tree), &format!("crate::{tree}::"));
        assert!(
            edges.get(a).is_some_and(|to| to.contains(b)),
            "the sources of proto/src/{tree} were read: {edges:?}"
        );
        if let Some(cycle) = cycle(&edges) {
            panic!(
                "a circle of imports in proto/src/{tree}: {}",
                cycle.join(" -> ")
            );
        }
    }
}

/// What the pure core must not name: the peers' clients and the async runtime.
const NOT_IN_THE_CORE: [&str; 4] = ["ovsdb", "openflow", "netlink", "tokio"];

/// Which of [`NOT_IN_THE_CORE`] `text` names: `crate::peer` (also inside a `crate::{…}`
/// group), or tokio anywhere.
fn peers_named(text: &str) -> BTreeSet<&'static str> {
    let groups: Vec<&str> = text
        .match_indices("crate::{")
        .filter_map(|(at, _)| text[at..].split_once('}').map(|(group, _)| group))
        .collect();
    NOT_IN_THE_CORE
        .into_iter()
        .filter(|peer| {
            let in_group = groups.iter().any(|group| {
                group
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .any(|word| word == *peer)
            });
            let named = if *peer == "tokio" {
                text.contains("tokio")
            } else {
                text.contains(&format!("crate::{peer}"))
            };
            named || in_group
        })
        .collect()
}

#[test]
fn the_core_names_no_peer_and_no_runtime() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/sdn/core");
    let files = sources(&core);
    assert!(files.len() > 5, "the core's sources were read: {files:?}");
    let mut named = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&core).expect("under src/sdn/core");
        if relative.starts_with("tests") {
            continue;
        }
        let text = code(&std::fs::read_to_string(&file).expect("readable source"));
        for peer in peers_named(&text) {
            named.push(format!("core/{}: {peer}", relative.display()));
        }
    }
    assert!(
        named.is_empty(),
        "the core names what only the shell may: {named:?}"
    );
}

#[test]
fn a_peer_in_the_core_is_found() {
    assert_eq!(
        peers_named("use crate::ovsdb::Cache;"),
        BTreeSet::from(["ovsdb"])
    );
    assert_eq!(
        peers_named("use crate::{netlink, value::IfName};"),
        BTreeSet::from(["netlink"])
    );
    assert_eq!(
        peers_named("fn f(_: tokio::sync::Notify) {}"),
        BTreeSet::from(["tokio"])
    );
    assert!(peers_named("use super::ports::PortStep; use crate::sdn::table;").is_empty());
}
