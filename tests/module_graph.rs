//! No import circles between modules: reads every .rs file of the workspace's crates,
//! names each file's module after its place in the tree (`src/engine/socket.rs` is
//! `engine::socket`, `mod.rs` and `lib.rs` name their directory), collects the modules
//! each one refers to (`use crate::a::b`, `use super::x`, and `crate::x::` and
//! `super::x::` paths in the code) and fails on every group of modules that reach each
//! other. A module using its own submodules is not a circle, and `mod x;` declares a
//! child, it imports nothing.
//!
//! Methods count too: a type's inherent methods may be spread over several files (the
//! engine's `impl Engine` blocks are, one topic a file), and `self.f()` inside an
//! `impl T` block refers to the module whose `impl T` defines `f`, as a path would.
//! (Only `self.` calls are seen: a method called on another value has a receiver whose
//! type the checker does not know.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The source directories of the workspace's crates, relative to the repository.
const CRATES: &[&str] = &["src", "preload/src", "proto/src", "calls/src"];

#[test]
fn no_import_circles() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut report = String::new();
    let mut crates = 0;
    for dir in CRATES {
        let src = repo.join(dir);
        if !src.is_dir() {
            continue;
        }
        crates += 1;
        let graph = Graph::read(&src);
        assert!(
            graph.modules.len() > 1,
            "{dir}: found {} modules, expected a crate",
            graph.modules.len()
        );
        for circle in graph.circles() {
            report.push_str(&format!("{dir}: {}\n", circle.render()));
        }
    }
    assert!(crates >= 2, "found {crates} crate source directories");
    assert!(
        report.is_empty(),
        "import circles between modules:\n{report}"
    );
}

/// A module's path inside its crate: `["engine", "socket"]`; the crate root is `[]`.
type ModPath = Vec<String>;

/// Where a reference was seen: the file (relative to the crate's directory) and line.
#[derive(Clone, Debug)]
struct Place {
    file: PathBuf,
    line: usize,
}

/// The modules of one crate and who refers to whom.
struct Graph {
    modules: BTreeSet<ModPath>,
    /// from -> to -> the first place `from` refers to `to`.
    edges: BTreeMap<ModPath, BTreeMap<ModPath, Place>>,
}

/// Modules that all reach each other, and the references between them.
#[derive(Debug)]
struct Circle {
    modules: Vec<ModPath>,
    edges: Vec<(ModPath, ModPath, Place)>,
}

fn show(m: &ModPath) -> String {
    if m.is_empty() {
        "crate".to_string()
    } else {
        m.join("::")
    }
}

impl Circle {
    fn render(&self) -> String {
        let names: Vec<String> = self.modules.iter().map(show).collect();
        let mut out = format!("circle between {}", names.join(", "));
        for (from, to, at) in &self.edges {
            let mutual = self.edges.iter().any(|(f, t, _)| f == to && t == from);
            out.push_str(&format!(
                "\n    {} {} {} ({}:{})",
                show(from),
                if mutual { "<->" } else { "->" },
                show(to),
                at.file.display(),
                at.line
            ));
        }
        out
    }

    fn names(&self) -> Vec<String> {
        self.modules.iter().map(show).collect()
    }
}

/// The module a file defines, from where it lies under the crate's directory.
fn file_module(rel: &Path) -> ModPath {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.strip_suffix(".rs").unwrap_or(&last);
    let is_root = parts.is_empty() && (stem == "lib" || stem == "main");
    if stem != "mod" && !is_root {
        parts.push(stem.to_string());
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

impl Graph {
    fn read(src: &Path) -> Graph {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        let mut sources = Vec::new();
        for path in files {
            let rel = path.strip_prefix(src).expect("under src").to_path_buf();
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            sources.push((rel, text));
        }
        Graph::from_sources(&sources)
    }

    /// The graph of files given as (path relative to the crate's directory, text).
    fn from_sources(sources: &[(PathBuf, String)]) -> Graph {
        let mut modules = BTreeSet::new();
        let mut scanned = Vec::new();
        // (type, method) -> the modules whose inherent impls define it.
        let mut defined: BTreeMap<(String, String), BTreeSet<ModPath>> = BTreeMap::new();
        let mut calls = Vec::new();
        for (rel, text) in sources {
            let module = file_module(rel);
            let toks = tokens(text);
            let refs = scan(&module, &toks);
            for r in &refs {
                modules.insert(r.from.clone());
            }
            let m = methods(&module, &toks);
            for (key, at) in m.defs {
                defined.entry(key).or_default().insert(at);
            }
            calls.extend(m.calls.into_iter().map(|c| (rel, c)));
            modules.insert(module);
            scanned.push((rel, refs));
        }
        // Each reference as (file, from, the module it names, line); a method call
        // names the one module that defines the method.
        let mut all: Vec<(&PathBuf, ModPath, ModPath, usize)> = Vec::new();
        for (rel, refs) in scanned {
            for r in refs {
                if let Some(to) = resolve(&modules, &r.from, &r.path) {
                    all.push((rel, r.from, to, r.line));
                }
            }
        }
        for (rel, c) in calls {
            let to = defined.get(&(c.ty, c.name));
            if let Some(to) = to.filter(|t| t.len() == 1).and_then(|t| t.first()) {
                all.push((rel, c.from, to.clone(), c.line));
            }
        }
        let mut edges: BTreeMap<ModPath, BTreeMap<ModPath, Place>> = BTreeMap::new();
        for (rel, from, to, line) in all {
            // Itself, or one of its own submodules: not a circle.
            if to.starts_with(&from) {
                continue;
            }
            edges.entry(from).or_default().entry(to).or_insert(Place {
                file: rel.clone(),
                line,
            });
        }
        Graph { modules, edges }
    }

    /// Every strongly connected group of more than one module (Tarjan's algorithm).
    fn circles(&self) -> Vec<Circle> {
        struct State<'a> {
            graph: &'a Graph,
            index: BTreeMap<&'a ModPath, usize>,
            low: BTreeMap<&'a ModPath, usize>,
            stack: Vec<&'a ModPath>,
            on_stack: BTreeSet<&'a ModPath>,
            groups: Vec<Vec<ModPath>>,
        }
        fn visit<'a>(s: &mut State<'a>, v: &'a ModPath) {
            let n = s.index.len();
            s.index.insert(v, n);
            s.low.insert(v, n);
            s.stack.push(v);
            s.on_stack.insert(v);
            let graph = s.graph;
            for w in graph.edges.get(v).into_iter().flat_map(|e| e.keys()) {
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if s.on_stack.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if s.low[v] == s.index[v] {
                let mut group = Vec::new();
                while let Some(w) = s.stack.pop() {
                    s.on_stack.remove(w);
                    group.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    s.groups.push(group);
                }
            }
        }
        let mut s = State {
            graph: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            groups: Vec::new(),
        };
        for m in &self.modules {
            if !s.index.contains_key(m) {
                visit(&mut s, m);
            }
        }
        let mut groups = s.groups;
        groups.sort();
        groups
            .into_iter()
            .map(|modules| {
                let mut edges = Vec::new();
                for from in &modules {
                    for (to, at) in self.edges.get(from).into_iter().flatten() {
                        if modules.contains(to) {
                            edges.push((from.clone(), to.clone(), at.clone()));
                        }
                    }
                }
                Circle { modules, edges }
            })
            .collect()
    }
}

/// The longest known module that `path`, as written in module `from`, names, or None
/// for a path into another crate.
fn resolve(modules: &BTreeSet<ModPath>, from: &ModPath, path: &[String]) -> Option<ModPath> {
    let mut abs: ModPath = Vec::new();
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") | Some("$crate") => rest = &path[1..],
        Some("super") | Some("self") => {
            abs = from.clone();
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "super" => {
                        abs.pop()?;
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        Some(first) => {
            // A plain path starts at a child module of `from`, or in another crate.
            let mut child = from.clone();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
            abs = from.clone();
        }
        None => return None,
    }
    abs.extend(rest.iter().cloned());
    while !modules.contains(&abs) {
        abs.pop()?;
    }
    Some(abs)
}

/// A `self.name(` call inside an `impl ty` block, written in module `from`.
#[derive(Debug)]
struct Call {
    from: ModPath,
    ty: String,
    name: String,
    line: usize,
}

/// The inherent methods a file defines, as ((type, name), module), and the calls on
/// `self` inside its impl blocks.
#[derive(Default)]
struct Methods {
    defs: Vec<((String, String), ModPath)>,
    calls: Vec<Call>,
}

/// The type an impl block is for, from the tokens between `impl` and its `{`: the
/// last name of the path after `for` (a trait impl) or of the whole header, generic
/// arguments and `where` clauses left out; and whether it is inherent (no `for`).
fn impl_type(header: &[&Tok]) -> Option<(String, bool)> {
    let mut angle = 0usize;
    let mut names: Vec<&str> = Vec::new();
    let mut inherent = true;
    for t in header {
        match t {
            Tok::Punct('<') => angle += 1,
            Tok::Punct('>') => angle = angle.saturating_sub(1),
            Tok::Ident(w) if angle == 0 && w == "for" => {
                names.clear();
                inherent = false;
            }
            Tok::Ident(w) if angle == 0 && w == "where" => break,
            Tok::Ident(w) if angle == 0 => names.push(w),
            _ => {}
        }
    }
    names.last().map(|n| (n.to_string(), inherent))
}

fn methods(module: &ModPath, toks: &[(Tok, usize)]) -> Methods {
    let mut out = Methods::default();
    let mut scope = Scope::new(module);
    // The impl blocks: (type, inherent, the brace depth inside them).
    let mut impls: Vec<(String, bool, usize)> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i].0 == Tok::Punct('}') && impls.last().is_some_and(|(_, _, d)| *d == scope.depth) {
            impls.pop();
        }
        let n = scope.step(toks, i);
        if n > 0 {
            i += n;
            continue;
        }
        match &toks[i].0 {
            Tok::Ident(w)
                if w == "impl"
                    && (i == 0
                        || matches!(&toks[i - 1].0, Tok::Punct('}' | ';' | '{' | ']'))
                        || ident(toks.get(i - 1)) == Some("unsafe")) =>
            {
                // An impl item (not `impl Trait` in a signature, which follows
                // `->`, `:` or `(`): the header runs to the block's `{`.
                let mut j = i + 1;
                while let Some((t, _)) = toks.get(j) {
                    if matches!(t, Tok::Punct('{' | ';' | '}')) {
                        break;
                    }
                    j += 1;
                }
                if toks.get(j).is_some_and(|t| t.0 == Tok::Punct('{')) {
                    let header: Vec<&Tok> = toks[i + 1..j].iter().map(|t| &t.0).collect();
                    if let Some((ty, inherent)) = impl_type(&header) {
                        scope.depth += 1;
                        impls.push((ty, inherent, scope.depth));
                        i = j + 1;
                        continue;
                    }
                }
            }
            Tok::Ident(w) if w == "fn" => {
                if let (Some((ty, true, d)), Some(name)) = (impls.last(), ident(toks.get(i + 1)))
                    && *d == scope.depth
                {
                    out.defs
                        .push(((ty.clone(), name.to_string()), scope.current()));
                }
            }
            Tok::Ident(w) if w == "self" => {
                if let (
                    Some((ty, _, _)),
                    Some((Tok::Punct('.'), _)),
                    Some(name),
                    Some((Tok::Punct('('), _)),
                ) = (
                    impls.last(),
                    toks.get(i + 1),
                    ident(toks.get(i + 2)),
                    toks.get(i + 3),
                ) {
                    out.calls.push(Call {
                        from: scope.current(),
                        ty: ty.clone(),
                        name: name.to_string(),
                        line: toks[i].1,
                    });
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// One token of Rust source with comments, strings and character literals removed.
#[derive(Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Path,
    Punct(char),
}

/// The tokens of `text`, each with its line.
fn tokens(text: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let ident_char = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if ch == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                if c.get(i) == Some(&'\n') {
                    line += 1;
                }
                i += 1;
            }
            i += 1;
        } else if ch == '\'' {
            // A character literal ('x', '\n', '\u{1F600}') or a lifetime ('a).
            if next == Some('\\') {
                i += 3; // the quote, the backslash and the escaped character
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if ident_char(ch) || (ch == '$' && next.is_some_and(ident_char)) {
            let start = i;
            i += 1;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            // Raw strings: r"..", r#".."#, br#".."#.
            let hashes = c[i..].iter().take_while(|&&h| h == '#').count();
            if (word == "r" || word == "br") && c.get(i + hashes) == Some(&'"') {
                i += hashes + 1;
                let close: Vec<char> = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                while i < c.len() && !c[i..].starts_with(&close) {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
                i += close.len();
            } else if word == "b" && c.get(i) == Some(&'\'') {
                // A byte literal b'x' or b'\n': the next round skips it as a char.
            } else {
                out.push((Tok::Ident(word), line));
            }
        } else if ch == ':' && next == Some(':') {
            out.push((Tok::Path, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

/// A path written in module `from` (an inline module of a file has its own path).
#[derive(Debug)]
struct Ref {
    from: ModPath,
    path: Vec<String>,
    line: usize,
}

/// Where a walk over a file's tokens is: the brace depth, and the inline
/// modules it is in (name, the brace depth inside them) below the file's.
struct Scope<'a> {
    module: &'a ModPath,
    inline: Vec<(String, usize)>,
    depth: usize,
}

impl<'a> Scope<'a> {
    fn new(module: &'a ModPath) -> Self {
        Scope {
            module,
            inline: Vec::new(),
            depth: 0,
        }
    }

    /// The module the walk is in.
    fn current(&self) -> ModPath {
        let mut m = self.module.clone();
        m.extend(self.inline.iter().map(|(n, _)| n.clone()));
        m
    }

    /// Follows `toks[i]` when it is `{`, `}` (leaving the inline module it
    /// closes) or `mod NAME {` (entering one): the tokens taken, 0 for any
    /// other.
    fn step(&mut self, toks: &[(Tok, usize)], i: usize) -> usize {
        match &toks[i].0 {
            Tok::Punct('{') => {
                self.depth += 1;
                1
            }
            Tok::Punct('}') => {
                if self.inline.last().is_some_and(|(_, d)| *d == self.depth) {
                    self.inline.pop();
                }
                self.depth -= 1;
                1
            }
            Tok::Ident(w) if w == "mod" => match (ident(toks.get(i + 1)), toks.get(i + 2)) {
                (Some(name), Some((Tok::Punct('{'), _))) => {
                    self.depth += 1;
                    self.inline.push((name.to_string(), self.depth));
                    3
                }
                _ => 0,
            },
            _ => 0,
        }
    }
}

fn ident(t: Option<&(Tok, usize)>) -> Option<&str> {
    match t {
        Some((Tok::Ident(w), _)) => Some(w),
        _ => None,
    }
}

/// The references of a file that defines module `module`: the paths of its `use`
/// items, and the `crate::`, `super::` and `self::` paths anywhere else.
fn scan(module: &ModPath, toks: &[(Tok, usize)]) -> Vec<Ref> {
    let mut refs = Vec::new();
    let mut scope = Scope::new(module);
    let mut i = 0;
    while i < toks.len() {
        let n = scope.step(toks, i);
        if n > 0 {
            i += n;
            continue;
        }
        match &toks[i].0 {
            Tok::Ident(w) if w == "use" => {
                let from = scope.current();
                let mut paths = Vec::new();
                i = use_tree(toks, i + 1, Vec::new(), &mut paths);
                for (path, line) in paths {
                    refs.push(Ref {
                        from: from.clone(),
                        path,
                        line,
                    });
                }
                continue;
            }
            Tok::Ident(w)
                if matches!(w.as_str(), "crate" | "$crate" | "super" | "self")
                    && toks.get(i + 1).is_some_and(|t| t.0 == Tok::Path)
                    && ident(toks.get(i.wrapping_sub(1))) != Some("in") =>
            {
                let line = toks[i].1;
                let mut path = vec![w.clone()];
                let mut j = i + 1;
                while toks.get(j).is_some_and(|t| t.0 == Tok::Path) {
                    match ident(toks.get(j + 1)) {
                        Some(seg) => path.push(seg.to_string()),
                        None => break,
                    }
                    j += 2;
                }
                refs.push(Ref {
                    from: scope.current(),
                    path,
                    line,
                });
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    refs
}

/// Reads one use tree from `toks[i]` on (`a::b::{c, d::e as f, *}`), adding each
/// full path under `prefix` to `out`; returns the index after the tree's end (after
/// the `;` of the item, or at the `,` or `}` that ends a nested tree).
fn use_tree(
    toks: &[(Tok, usize)],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, usize)>,
) -> usize {
    let line = toks.get(i).map_or(0, |t| t.1);
    if toks.get(i).is_some_and(|t| t.0 == Tok::Path) {
        i += 1; // a leading `::`: another crate, left as it is
        prefix.push("::".to_string());
    }
    loop {
        match toks.get(i) {
            Some((Tok::Ident(w), _)) if w == "as" => {
                i += 2; // the alias
            }
            Some((Tok::Ident(w), _)) => {
                prefix.push(w.clone());
                i += 1;
            }
            Some((Tok::Path, _)) => i += 1,
            Some((Tok::Punct('*'), _)) => i += 1,
            Some((Tok::Punct('{'), _)) => {
                i += 1;
                loop {
                    match toks.get(i) {
                        Some((Tok::Punct('}'), _)) => {
                            i += 1;
                            break;
                        }
                        Some((Tok::Punct(','), _)) => i += 1,
                        None => return i,
                        _ => i = use_tree(toks, i, prefix.clone(), out),
                    }
                }
                // The group was the tree's last part.
                if toks.get(i).is_some_and(|t| t.0 == Tok::Punct(';')) {
                    i += 1;
                }
                return i;
            }
            Some((Tok::Punct(';'), _)) => {
                out.push((prefix, line));
                return i + 1;
            }
            Some((Tok::Punct(','), _)) | Some((Tok::Punct('}'), _)) | None => {
                out.push((prefix, line));
                return i;
            }
            Some(_) => i += 1,
        }
    }
}

// ---- the checker's own tests, on small trees written to a temporary directory ----

fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
    }
    dir
}

fn circles_of(files: &[(&str, &str)]) -> Vec<Vec<String>> {
    let dir = tree(files);
    let graph = Graph::read(dir.path());
    graph.circles().iter().map(Circle::names).collect()
}

#[test]
fn siblings_importing_each_other_are_a_circle() {
    let found = circles_of(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("a.rs", "use crate::b::Thing;\npub struct Other;\n"),
        ("b.rs", "use super::a::Other;\npub struct Thing;\n"),
        ("c.rs", "use crate::a::Other;\n"),
    ]);
    assert_eq!(found, vec![vec!["a".to_string(), "b".to_string()]]);
}

#[test]
fn a_circle_through_paths_in_code_and_groups() {
    // engine::x -> engine::y by a path in code, engine::y -> fuse by a group,
    // fuse -> engine::x by a nested group.
    let found = circles_of(&[
        ("lib.rs", "pub mod engine;\npub mod fuse;\n"),
        ("engine/mod.rs", "mod x;\nmod y;\n"),
        ("engine/x.rs", "fn f() { crate::engine::y::g(); }\n"),
        (
            "engine/y.rs",
            "use crate::{fuse::{self, Reply}, engine::x as ex};\npub fn g() {}\n",
        ),
        ("fuse.rs", "use crate::{engine::{x::f, y}};\n"),
    ]);
    assert_eq!(
        found,
        vec![vec![
            "engine::x".to_string(),
            "engine::y".to_string(),
            "fuse".to_string()
        ]]
    );
}

#[test]
fn parents_children_and_inline_modules_are_no_circle() {
    let found = circles_of(&[
        ("lib.rs", "pub mod engine;\npub use engine::Engine;\n"),
        (
            "engine/mod.rs",
            "mod socket;\nmod data;\nuse socket::Socket;\npub struct Engine;\n\
             impl Engine { fn f(&self) { data::send(); self::socket::g(); } }\n",
        ),
        (
            "engine/socket.rs",
            "use super::Engine;\nuse crate::Engine as E;\npub struct Socket;\n\
             pub fn g() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n    \
             use super::super::data::send;\n}\n",
        ),
        (
            "engine/data.rs",
            "use super::{Engine, socket::Socket};\npub fn send() {}\n",
        ),
    ]);
    assert_eq!(found, Vec::<Vec<String>>::new());
}

#[test]
fn comments_strings_and_other_crates_are_no_references() {
    let found = circles_of(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a.rs",
            "// use crate::b::X;\n/* crate::b::Y */\nconst S: &str = \"crate::b::Z\";\n\
             const R: &str = r#\"super::b::W\"#;\nconst C: char = '\"';\nuse b::Q;\n\
             use ::b::P;\npub(in crate::a) fn f<'a>(x: &'a str) -> &'a str { x }\n",
        ),
        ("b.rs", "use crate::a::f;\n"),
    ]);
    assert_eq!(found, Vec::<Vec<String>>::new());
}

#[test]
fn the_report_names_both_directions_and_where() {
    let dir = tree(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "\n\nuse crate::b::X;\n"),
        ("b.rs", "fn f() { super::a::g() }\n"),
    ]);
    let circles = Graph::read(dir.path()).circles();
    assert_eq!(circles.len(), 1);
    assert_eq!(
        circles[0].render(),
        "circle between a, b\n    a <-> b (a.rs:3)\n    b <-> a (b.rs:1)"
    );
}

#[test]
fn file_modules_follow_the_tree() {
    assert_eq!(file_module(Path::new("lib.rs")), Vec::<String>::new());
    assert_eq!(file_module(Path::new("main.rs")), Vec::<String>::new());
    assert_eq!(file_module(Path::new("engine/mod.rs")), vec!["engine"]);
    assert_eq!(
        file_module(Path::new("engine/main.rs")),
        vec!["engine", "main"]
    );
    assert_eq!(
        file_module(Path::new("engine/tree/dirops.rs")),
        vec!["engine", "tree", "dirops"]
    );
    assert_eq!(file_module(Path::new("fdchannel.rs")), vec!["fdchannel"]);
}

#[test]
fn methods_of_one_type_in_two_files_calling_each_other_are_a_circle() {
    // engine::a's `impl Engine` calls engine::b's method and back, with no
    // path between them; the same names on another type, or called on
    // another value, or defined by a trait impl, are no reference.
    let found = circles_of(&[
        ("lib.rs", "pub mod engine;\nmod other;\n"),
        (
            "engine/mod.rs",
            "mod a;\nmod b;\nmod c;\npub struct Engine;\n",
        ),
        (
            "engine/a.rs",
            "use super::Engine;\nimpl Engine {\n    pub(crate) fn send(&self) { self.timer(); }\n}\n",
        ),
        (
            "engine/b.rs",
            "use super::Engine;\nimpl<'a> Engine where Self: Sized {\n    fn timer(&self) -> impl Sized {\n        \
             if true { self.send() }\n    }\n}\n",
        ),
        (
            "engine/c.rs",
            "use super::Engine;\nstruct Q;\nimpl Q { fn put(&self) { self.send(); } }\n\
             impl Drop for Engine { fn drop(&mut self) {} }\n\
             impl Engine { fn g(&self, q: &Q) { q.put(); self.drop_it(); } }\n",
        ),
        (
            "other.rs",
            "use crate::engine::Engine;\nimpl Clone for Engine { fn clone(&self) -> Engine { self.g() } }\n",
        ),
    ]);
    assert_eq!(
        found,
        vec![vec!["engine::a".to_string(), "engine::b".to_string()]]
    );
}
