//! No two modules of the engine depend on each other, directly or round a
//! longer circle: read from the source's paths (`super::x`,
//! `crate::engine::x`, and names `mod.rs` re-exports from `x`), each
//! top-level module of src/engine/ counting as one, `mod.rs` and the test
//! files left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).expect("src/engine is readable") {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&p).expect("a source file");
            out.push((p.to_string_lossy().into_owned(), text));
        }
    }
}

/// The module `path` (under src/engine/) belongs to; None for mod.rs.
fn module_of(root: &Path, path: &str) -> Option<String> {
    let rel = Path::new(path).strip_prefix(root).ok()?;
    let first = rel.components().next()?.as_os_str().to_string_lossy();
    let name = first.trim_end_matches(".rs").to_string();
    (name != "mod").then_some(name)
}

/// The text before the file's unit tests.
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]\nmod tests")
        .map_or(text, |i| &text[..i])
}

fn words(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// The engine modules a source names: after `super::` or
/// `crate::engine::`, its first path segment if that is a module, else
/// the re-exported names in the braces or path that follows.
fn deps_of(
    text: &str,
    modules: &BTreeSet<String>,
    reexports: &BTreeMap<String, String>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for prefix in ["super::", "crate::engine::"] {
        for (i, _) in text.match_indices(prefix) {
            let rest = &text[i + prefix.len()..];
            let rest = rest.strip_prefix("super::").unwrap_or(rest);
            let end = rest.find([';', '\n', '(', ')', '=']).unwrap_or(rest.len());
            let path = &rest[..end];
            let first = words(path).next().unwrap_or("");
            if modules.contains(first) {
                out.insert(first.to_string());
                continue;
            }
            for w in words(path) {
                if let Some(m) = reexports.get(w) {
                    out.insert(m.clone());
                }
            }
        }
    }
    out
}

#[test]
fn engine_modules_form_no_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mod_rs = std::fs::read_to_string(root.join("mod.rs")).expect("mod.rs");
    let mut reexports = BTreeMap::new();
    for line in mod_rs.lines() {
        let Some(rest) = line.strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, names)) = rest.split_once("::") else {
            continue;
        };
        for n in words(names) {
            reexports.insert(n.to_string(), module.to_string());
        }
    }
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|(p, _)| module_of(&root, p))
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (p, text) in &files {
        let Some(m) = module_of(&root, p) else {
            continue;
        };
        if m.ends_with("tests") {
            continue;
        }
        let mut deps = deps_of(without_tests(text), &modules, &reexports);
        deps.remove(&m);
        deps.retain(|d| !d.ends_with("tests"));
        graph.entry(m).or_default().extend(deps);
    }
    // A module reaches itself only round a circle.
    for start in graph.keys() {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<(&String, Vec<&String>)> = vec![(start, vec![start])];
        while let Some((m, trail)) = todo.pop() {
            for d in graph.get(m).into_iter().flatten() {
                assert!(d != start, "import circle: {trail:?} -> {d}");
                if seen.insert(d.clone()) {
                    let mut t = trail.clone();
                    t.push(d);
                    todo.push((d, t));
                }
            }
        }
    }
}
