//! No two modules of the library import each other, directly or through a
//! cycle: read from the `crate::` paths of each file in src/ (the crate
//! root, which declares them all, aside).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The modules that `text` names with `crate::MOD` or `crate::{MOD, ...}`.
fn imports(text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        let names: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => group[..group.find('}').unwrap_or(0)].split(',').collect(),
            None => vec![rest],
        };
        for n in names {
            let n = n.trim();
            let end = n
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(n.len());
            if modules.contains(&n[..end]) {
                out.insert(n[..end].to_string());
            }
        }
    }
    out
}

/// A cycle through `graph`, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut c = path[at..].to_vec();
            c.push(m.to_string());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for d in &graph[m] {
            if let Some(c) = visit(d, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(m, graph, &mut Vec::new(), &mut done))
}

fn graph_of(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = files.iter().map(|(m, _)| m.clone()).collect();
    files
        .iter()
        .map(|(m, text)| {
            let mut deps = imports(text, &modules);
            deps.remove(m);
            (m.clone(), deps)
        })
        .collect()
}

#[test]
fn the_librarys_modules_import_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for f in std::fs::read_dir(&src).unwrap().flatten() {
        let p = f.path();
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if p.extension().is_some_and(|e| e == "rs") && name != "lib" {
            files.push((name, std::fs::read_to_string(&p).unwrap()));
        }
    }
    assert!(
        files.len() > 10,
        "read {} files of {}",
        files.len(),
        src.display()
    );
    let graph = graph_of(&files);
    assert_eq!(cycle(&graph), None, "an import circle among {graph:?}");
}

#[test]
fn a_circle_is_found() {
    let file = |m: &str, text: &str| (m.to_string(), text.to_string());
    let files = [
        file("a", "use crate::b::x;"),
        file("b", "use crate::{log, c};"),
        file("c", "fn f() { crate::a::g() }"),
        file("log", "use crate::errno::Res;"),
    ];
    let g = graph_of(&files);
    assert_eq!(g["b"], ["c", "log"].map(String::from).into());
    assert_eq!(
        cycle(&g),
        Some(["a", "b", "c", "a"].map(String::from).to_vec())
    );
    assert_eq!(cycle(&graph_of(&files[1..])), None);
}
