//! The layering rule of `crates/server/src`: its top-level modules import each other without a circle
//! (ARCHITECTURE.md, "crates/server"). Read from the source: every `crate::<module>` path in a module's
//! files (`use` lines and inline paths, `crate::{a, b}` groups too) is an edge from that module to
//! `<module>`; a path through the crate root's re-exports (`crate::Gateway`) is refused, so every edge
//! is visible.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The modules `lib.rs` declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn top_level_modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l.strip_prefix("pub ").or(l.strip_prefix("pub(crate) ")).unwrap_or(l);
            rest.strip_prefix("mod ")?.strip_suffix(';').map(str::to_string)
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The first names of the `crate::…` paths in `code` (line comments skipped): `crate::a::b` gives
/// `a`, `crate::{a::x, b}` gives `a` and `b`.
fn crate_paths(code: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
    };
    let mut names = Vec::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or_default();
        names.extend(
            line.match_indices("crate::")
                .map(|(i, _)| line[i + 7..].to_string())
                .filter_map(|rest| (!rest.starts_with('{')).then(|| ident(&rest))),
        );
    }
    // Groups may span lines: read them from the whole text.
    let code: String =
        code.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n");
    for (i, _) in code.match_indices("crate::{") {
        // Split the group's top level on commas.
        let group = &code[i + 8..];
        let mut depth = 0;
        let mut item = String::new();
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    names.push(ident(&item));
                    item.clear();
                    continue;
                }
                _ => {}
            }
            item.push(c);
        }
        names.push(ident(&item));
    }
    names.retain(|n| !n.is_empty());
    names
}

/// Module → the other top-level modules its files name; refuses paths through the root's re-exports.
fn module_graph() -> Graph {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let modules = top_level_modules(&lib);
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut graph: Graph = modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for file in files {
        let relative = file.strip_prefix(src()).unwrap();
        let first = relative.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" {
            continue;
        }
        assert!(modules.contains(&module), "{} is not under a module lib.rs declares", relative.display());
        let code = std::fs::read_to_string(&file).unwrap();
        for name in crate_paths(&code) {
            assert!(
                modules.contains(&name),
                "{}: `crate::{name}` is not a module: name the module the item lives in",
                relative.display()
            );
            if name != module {
                graph.get_mut(&module).unwrap().insert(name);
            }
        }
    }
    graph
}

/// A circle of `graph` (its modules in order, the first repeated at the end), if it has one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit<'g>(
        graph: &'g Graph,
        node: &'g str,
        path: &mut Vec<&'g str>,
        done: &mut BTreeSet<&'g str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| *n == node) {
            let mut cycle: Vec<String> = path[at..].iter().map(|n| n.to_string()).collect();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node);
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(graph, next, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node);
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(graph, node, &mut Vec::new(), &mut done))
}

#[test]
fn server_modules_import_each_other_without_circles() {
    let graph = module_graph();
    // The reading sees the edges there are (a parser that found nothing would pass vacuously).
    assert!(graph.len() >= 20, "{graph:?}");
    for (from, to) in
        [("http", "host_api"), ("wire", "gateway"), ("host_api", "request_body"), ("sse", "state")]
    {
        assert!(graph[from].contains(to), "{from} → {to} not found: {graph:?}");
    }
    if let Some(cycle) = find_cycle(&graph) {
        panic!("the server's modules import each other in a circle: {}", cycle.join(" → "));
    }
}

#[test]
fn the_cycle_check_finds_a_circle() {
    let code =
        "use crate::a::X;\nuse crate::{b::Y,\n  c::{self, Z}};\nfn f() { crate::d::g() } // crate::e\n";
    assert_eq!(crate_paths(code), ["a", "d", "b", "c"]);
    let graph = |edges: &[(&str, &str)]| {
        let mut g = Graph::new();
        for (from, to) in edges {
            g.entry(from.to_string()).or_default().insert(to.to_string());
            g.entry(to.to_string()).or_default();
        }
        g
    };
    assert_eq!(find_cycle(&graph(&[("http", "state"), ("state", "gateway"), ("http", "gateway")])), None);
    assert_eq!(
        find_cycle(&graph(&[("error", "wire"), ("wire", "gateway"), ("gateway", "error"), ("http", "wire")])),
        Some(vec!["error".into(), "wire".into(), "gateway".into(), "error".into()])
    );
}
