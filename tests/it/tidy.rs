//! Repository hygiene: every Rust file opens with a `//!` header saying what it owns, and the
//! library's imports keep to the layer order of ARCHITECTURE.md with no circle of files.

use super::common::root;

fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_starts_with_a_module_doc() {
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches"] {
        let d = root().join(dir);
        if d.is_dir() {
            rust_files(&d, &mut files);
        }
    }
    assert!(files.len() >= 8, "found only {} Rust files", files.len());
    let missing: Vec<String> = files
        .iter()
        .filter(|p| !std::fs::read_to_string(p).expect("read").starts_with("//!"))
        .map(|p| p.display().to_string())
        .collect();
    assert!(missing.is_empty(), "files without a //! header: {missing:?}");
}

/// The layer table of ARCHITECTURE.md ("## Layers"): module → layer, from its rows
/// `| N | module, module | … |`.
fn layers() -> std::collections::BTreeMap<String, u32> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("read ARCHITECTURE.md");
    let section = text.split("\n## Layers").nth(1).expect("ARCHITECTURE.md has a '## Layers' section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut layers = std::collections::BTreeMap::new();
    for row in section.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        let Some(Ok(layer)) = cells.first().map(|c| c.parse::<u32>()) else { continue };
        for module in cells.get(1).expect("a modules cell").split(',') {
            let module = module.trim().trim_matches('`');
            assert!(layers.insert(module.to_string(), layer).is_none(), "{module} is in two layers");
        }
    }
    layers
}

/// The module path of a library file: `src/a/b.rs` → `[a, b]`, `src/a/mod.rs` → `[a]`.
fn module_of(src: &std::path::Path, file: &std::path::Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src").with_extension("");
    let mut path: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if path.last().is_some_and(|s| s == "mod") {
        path.pop();
    }
    path
}

/// The file that holds the deepest module named by the start of `path` (crate-relative).
fn file_of(src: &std::path::Path, path: &[String]) -> Option<std::path::PathBuf> {
    let (mut dir, mut found) = (src.to_path_buf(), None);
    for segment in path {
        let (file, module) = (dir.join(format!("{segment}.rs")), dir.join(segment).join("mod.rs"));
        if file.is_file() {
            found = Some(file);
        } else if module.is_file() {
            found = Some(module);
        } else {
            break;
        }
        dir = dir.join(segment);
    }
    found
}

/// The paths a `use` tree names, each as its segments: `a::{b, c::{d, e}}` → a::b, a::c::d, a::c::e.
fn expand_use(tree: &str) -> Vec<Vec<String>> {
    fn split_top(s: &str) -> Vec<&str> {
        let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
        for (i, c) in s.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&s[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&s[start..]);
        parts
    }
    let tree = tree.trim();
    match tree.find('{') {
        None => {
            let path = tree.split(" as ").next().unwrap_or(tree);
            vec![path.split("::").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()]
        }
        Some(open) => {
            let prefix: Vec<String> =
                tree[..open].split("::").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            split_top(inner)
                .into_iter()
                .filter(|p| !p.trim().is_empty())
                .flat_map(expand_use)
                .map(|rest| prefix.iter().cloned().chain(rest).collect())
                .collect()
        }
    }
}

/// Every library file under `src/` (the binary's `main.rs` and `cli/` aside) with the files it
/// imports: `use` trees and inline paths (`crate::…`, `super::…`, a child module's), outside
/// `#[cfg(test)]` modules.
fn library_imports() -> Vec<(std::path::PathBuf, std::collections::BTreeSet<std::path::PathBuf>)> {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.retain(|f| f != &src.join("main.rs") && f != &src.join("lib.rs") && !f.starts_with(src.join("cli")));
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).expect("read");
            let text = text.split("#[cfg(test)]").next().unwrap_or(&text);
            // Comments name paths without importing them.
            let code: String = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .map(|l| l.split(" // ").next().unwrap_or(l))
                .collect::<Vec<_>>()
                .join("\n");
            let code = code.as_str();
            let here = module_of(&src, &file);
            let children: Vec<String> = code
                .lines()
                .filter_map(|l| l.trim().strip_prefix("pub mod ").or_else(|| l.trim().strip_prefix("mod ")))
                .map(|l| l.trim_end_matches(';').trim().to_string())
                .collect();
            let absolute = |path: Vec<String>| -> Option<Vec<String>> {
                let first = path.first()?.as_str();
                Some(match first {
                    "crate" => path[1..].to_vec(),
                    "super" => {
                        let ups = path.iter().take_while(|s| *s == "super").count();
                        let base = &here[..here.len().saturating_sub(ups)];
                        base.iter().chain(&path[ups..]).cloned().collect()
                    }
                    "self" => here.iter().cloned().chain(path[1..].iter().cloned()).collect(),
                    _ if children.iter().any(|c| c == first) => here.iter().cloned().chain(path).collect(),
                    _ => return None,
                })
            };
            let mut paths: Vec<Vec<String>> = Vec::new();
            for statement in code.split(';') {
                let s = statement.trim_start();
                let s = s.strip_prefix("pub(crate) ").or_else(|| s.strip_prefix("pub ")).unwrap_or(s);
                if let Some(tree) = s.strip_prefix("use ") {
                    paths.extend(expand_use(tree));
                }
            }
            paths.extend(inline_paths(code, &children));
            let targets = paths
                .into_iter()
                .filter_map(absolute)
                .filter_map(|p| file_of(&src, &p))
                .filter(|t| t != &file)
                .collect();
            (file, targets)
        })
        .collect()
}

/// Inline paths in code (outside `use` statements too) that start at `crate::`, `super::`,
/// `self::` or one of `children` (the file's own child modules: `gate::speaks_of_listener`).
fn inline_paths(code: &str, children: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let starts: Vec<String> =
        ["crate", "super", "self"].iter().map(|s| s.to_string()).chain(children.iter().cloned()).collect();
    for start in &starts {
        let needle = format!("{start}::");
        for (at, _) in code.match_indices(&needle) {
            // A path's first segment: not the tail of a longer name or of another path.
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &code[at..];
            let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
            out.push(rest[..end].split("::").filter(|s| !s.is_empty()).map(str::to_string).collect());
        }
    }
    out
}

#[test]
fn every_import_keeps_to_the_layer_order_of_architecture_md_and_no_files_import_each_other_in_a_circle() {
    let src = root().join("src");
    let layers = layers();
    assert!(layers.len() >= 10, "the layer table names only {} modules", layers.len());
    let imports = library_imports();
    let unit = |file: &std::path::Path| module_of(&src, file).first().cloned().unwrap_or_default();
    let mut against = Vec::new();
    for (file, targets) in &imports {
        let from = unit(file);
        let Some(&low) = layers.get(&from) else {
            panic!("module {from} ({}) is in no layer of ARCHITECTURE.md", file.display())
        };
        for t in targets {
            let to = unit(t);
            let Some(&high) = layers.get(&to) else { panic!("module {to} is in no layer of ARCHITECTURE.md") };
            if high > low {
                against.push(format!("{} (layer {low}) imports {} (layer {high})", file.display(), t.display()));
            }
        }
    }
    assert!(against.is_empty(), "imports against the layer order:\n{}", against.join("\n"));
    // No circle of files: a depth-first search; every back edge closes a circle.
    let graph: std::collections::BTreeMap<_, _> = imports.iter().map(|(f, t)| (f.clone(), t.clone())).collect();
    type Graph = std::collections::BTreeMap<std::path::PathBuf, std::collections::BTreeSet<std::path::PathBuf>>;
    fn visit(
        node: &std::path::PathBuf,
        graph: &Graph,
        done: &mut std::collections::BTreeSet<std::path::PathBuf>,
        stack: &mut Vec<std::path::PathBuf>,
        circles: &mut Vec<String>,
    ) {
        if done.contains(node) {
            return;
        }
        if let Some(at) = stack.iter().position(|n| n == node) {
            let names: Vec<String> = stack[at..].iter().map(|p| p.display().to_string()).collect();
            circles.push(names.join(" -> "));
            return;
        }
        stack.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            visit(next, graph, done, stack, circles);
        }
        stack.pop();
        done.insert(node.clone());
    }
    let (mut done, mut circles) = (std::collections::BTreeSet::new(), Vec::new());
    for node in graph.keys() {
        visit(node, &graph, &mut done, &mut Vec::new(), &mut circles);
    }
    assert!(circles.is_empty(), "files that import each other in a circle:\n{}", circles.join("\n"));
    // The check sees imports: the known arrows are there.
    let has = |from: &str, to: &str| graph.get(&src.join(from)).is_some_and(|t| t.contains(&src.join(to)));
    assert!(
        has("retrieve/signals.rs", "score.rs")
            && has("gpu/kernels.rs", "score.rs")
            && has("retrieve/memory.rs", "retrieve/bm25.rs")
    );
    // Inline paths are imports too: `super::…` and a child module's.
    let code = "fn f() { super::memory::Memory::new(); gate::speaks(); other::gate::x(); }";
    let found = inline_paths(code, &["gate".to_string()]);
    assert_eq!(found, [vec!["super", "memory", "Memory", "new"], vec!["gate", "speaks"]]);
}

#[test]
fn no_source_file_outgrows_its_room_and_the_readme_stays_a_users_page() {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let lines = |p: &std::path::Path| std::fs::read_to_string(p).expect("read").lines().count();
    let long: Vec<String> =
        files.iter().filter(|f| lines(f) > 800).map(|f| format!("{} ({} lines)", f.display(), lines(f))).collect();
    assert!(long.is_empty(), "files under src/ over 800 lines (split them by job): {long:?}");
    let main = lines(&src.join("main.rs"));
    assert!(main <= 150, "src/main.rs has {main} lines: the binary's entry parses, configures and dispatches");
    let readme = lines(&root().join("README.md"));
    assert!(readme <= 300, "README.md has {readme} lines: detail belongs in docs/");
}

/// The methods of each type that `src/retrieve/` implements, summed over its files: every `fn`
/// one level inside an `impl … {` block, outside `#[cfg(test)]` modules.
fn retrieve_methods() -> std::collections::BTreeMap<String, usize> {
    let mut files = Vec::new();
    rust_files(&root().join("src/retrieve"), &mut files);
    let mut methods = std::collections::BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        let text = text.split("#[cfg(test)]").next().unwrap_or(&text);
        let mut current: Option<String> = None;
        for line in text.lines() {
            if let Some(header) = line.strip_prefix("impl").filter(|h| h.ends_with('{')) {
                // `impl<'a> Name<'a> {`, `impl Trait for Name<'_> {`: the implementing type's name.
                let header = header.trim_end_matches('{').trim();
                let header = if header.starts_with('<') {
                    header.find("> ").map_or(header, |at| &header[at + 2..])
                } else {
                    header
                };
                let ty = header.rsplit(" for ").next().unwrap_or(header);
                let name: String = ty.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                current = Some(name);
            } else if line.starts_with('}') {
                current = None;
            } else if let Some(ty) = &current {
                let l = line.trim_start();
                let indent = line.len() - l.len();
                let l = l.strip_prefix("pub(super) ").or_else(|| l.strip_prefix("pub(crate) ")).unwrap_or(l);
                let l = l.strip_prefix("pub ").unwrap_or(l);
                if indent == 4 && (l.starts_with("fn ") || l.starts_with("const fn ")) {
                    *methods.entry(ty.clone()).or_insert(0) += 1;
                }
            }
        }
    }
    methods
}

#[test]
fn no_type_in_retrieve_grows_past_25_methods() {
    let methods = retrieve_methods();
    // The count sees the types: the index and its stages are there.
    for ty in ["Memory", "Scorer", "Collector", "LearnedGate", "GnnRerank"] {
        assert!(methods.get(ty).is_some_and(|&n| n > 0), "no methods found for {ty}: {methods:?}");
    }
    let large: Vec<String> =
        methods.iter().filter(|(_, n)| **n > 25).map(|(ty, n)| format!("{ty} ({n} methods)")).collect();
    assert!(large.is_empty(), "types in src/retrieve/ over 25 methods (split them into stages): {large:?}");
}
