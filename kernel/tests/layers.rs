//! The kernel's layer order, enforced: `src/lib.rs` lists the layers, lowest
//! first, and a module may name (`crate::…`) only modules of a lower layer.
//! A cycle between modules needs an import that goes up or sideways, so none
//! can form.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layer of each module, read from the numbered list in the crate docs:
/// `//! 3. `events`, `content` — …`.
fn layers(lib: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for line in lib.lines().filter_map(|l| l.strip_prefix("//! ")) {
        let Some((number, rest)) = line.split_once(". ") else { continue };
        let Ok(layer) = number.trim().parse::<usize>() else { continue };
        let names = rest.split(" — ").next().unwrap_or_default();
        for name in names.split(',').map(|n| n.trim().trim_matches('`')) {
            assert!(out.insert(name.to_string(), layer).is_none(), "`{name}` is listed twice");
        }
    }
    out
}

/// The modules `lib.rs` declares.
fn declared(lib: &str) -> Vec<String> {
    lib.lines()
        .map(|l| l.trim_start_matches("pub "))
        .filter_map(|l| l.strip_prefix("mod ").and_then(|m| m.strip_suffix(';')))
        .map(str::to_string)
        .collect()
}

/// Every module a source text names as `crate::<module>`, with its line,
/// comments left out (docs may mention a module they do not import).
fn named(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let group = rest.strip_prefix('{').map(|g| g.split('}').next().unwrap_or_default());
            let names: Vec<&str> = match group {
                Some(group) => group.split(',').map(|p| p.trim().split("::").next().unwrap_or_default()).collect(),
                None => vec![rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or_default()],
            };
            out.extend(names.into_iter().filter(|m| !m.is_empty()).map(|m| (n + 1, m.to_string())));
        }
    }
    out
}

/// The top-level module a source file belongs to: `planner/budget.rs` → `planner`.
fn module_of(relative: &Path) -> String {
    let first = relative.components().next().expect("a file path").as_os_str().to_string_lossy().into_owned();
    first.strip_suffix(".rs").map(str::to_string).unwrap_or(first)
}

/// Every import that does not go strictly down a layer, as `file:line: …`.
fn violations(layers: &BTreeMap<String, usize>, files: &[(PathBuf, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (path, text) in files {
        let own = module_of(path);
        if own == "lib" {
            continue;
        }
        let Some(&own_layer) = layers.get(&own) else {
            out.push(format!("{}: module `{own}` is in no layer of lib.rs", path.display()));
            continue;
        };
        for (line, other) in named(text) {
            if other == own {
                continue;
            }
            match layers.get(&other) {
                Some(&layer) if layer < own_layer => {}
                Some(&layer) => out.push(format!(
                    "{}:{line}: `{own}` (layer {own_layer}) imports `{other}` (layer {layer}); only lower layers may be imported",
                    path.display()
                )),
                None => out.push(format!("{}:{line}: `crate::{other}` is no module in a layer", path.display())),
            }
        }
    }
    out
}

fn sources(dir: &Path, root: &Path, out: &mut Vec<(PathBuf, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).expect("kernel/src reads").map(|e| e.expect("a directory entry").path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            sources(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("a source file reads");
            out.push((path.strip_prefix(root).expect("under src").to_path_buf(), text));
        }
    }
}

fn kernel() -> (String, Vec<(PathBuf, String)>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &root, &mut files);
    (std::fs::read_to_string(root.join("lib.rs")).expect("lib.rs reads"), files)
}

#[test]
fn every_import_goes_down_a_layer() {
    let (lib, files) = kernel();
    let layers = layers(&lib);
    let found = violations(&layers, &files);
    assert!(found.is_empty(), "imports against the layer order in src/lib.rs:\n{}", found.join("\n"));
    // The walk saw the whole crate, folders included.
    assert!(files.len() > 40 && files.iter().any(|(p, _)| p.ends_with("recall/rank.rs")), "{} files", files.len());
}

#[test]
fn every_module_has_exactly_one_layer() {
    let (lib, _) = kernel();
    let layers = layers(&lib);
    let mut modules = declared(&lib);
    modules.sort();
    assert_eq!(layers.keys().cloned().collect::<Vec<_>>(), modules, "lib.rs's layer list and its `mod` declarations differ");
    let mut seen: Vec<usize> = layers.values().copied().collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen, (0..seen.len()).collect::<Vec<_>>(), "layers are numbered 0, 1, 2, … without gaps");
}

#[test]
fn an_import_up_or_sideways_is_caught() {
    let (lib, mut files) = kernel();
    let layers = layers(&lib);
    let plant = |files: &mut Vec<(PathBuf, String)>, at: &str, line: &str| {
        let file = files.iter_mut().find(|(p, _)| p == Path::new(at)).expect("the file exists");
        file.1.push_str(line);
    };
    // Up: the content store reaching for recall's index.
    plant(&mut files, "content.rs", "\nuse crate::recall::Index;\n");
    // Sideways: the planner and the index share a layer and know nothing of each other.
    plant(&mut files, "planner/budget.rs", "\nfn f() { crate::index::terms(\"x\"); }\n");
    // Grouped imports are read too.
    plant(&mut files, "store.rs", "\nuse crate::{error, memory::load};\n");
    // A comment is not an import.
    plant(&mut files, "tokens.rs", "\n// see crate::commands for the callers\n");
    let found = violations(&layers, &files);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].starts_with("content.rs:") && found[0].contains("imports `recall`"), "{}", found[0]);
    assert!(found[1].starts_with("planner/budget.rs:") && found[1].contains("imports `index`"), "{}", found[1]);
    assert!(found[2].starts_with("store.rs:") && found[2].contains("imports `memory`"), "{}", found[2]);
}

#[test]
fn a_module_outside_the_layers_is_caught() {
    let (lib, mut files) = kernel();
    files.push((PathBuf::from("inspector/mod.rs"), "use crate::error::Result;\n".into()));
    let found = violations(&layers(&lib), &files);
    assert_eq!(found, vec!["inspector/mod.rs: module `inspector` is in no layer of lib.rs".to_string()]);
}
