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
        .map(|l| l.rsplit(']').next().unwrap_or(l).trim().trim_start_matches("pub "))
        .filter_map(|l| l.strip_prefix("mod ").and_then(|m| m.strip_suffix(';')))
        .map(str::to_string)
        .collect()
}

/// The text as the compiler reads its paths: comments and the contents of
/// string and character literals blanked out, line breaks kept.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let peek = |i: usize, k: usize| chars.get(i + k).copied().unwrap_or('\0');
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '/' && peek(i, 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if chars[i] == '/' && peek(i, 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && peek(i, 1) == '*' {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && peek(i, 1) == '/' {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if chars[i] == 'r' && (peek(i, 1) == '"' || (peek(i, 1) == '#' && (peek(i, 2) == '"' || peek(i, 2) == '#'))) {
            // A raw string: r"…", r#"…"#, r##"…"##.
            let hashes = (1..).take_while(|&k| peek(i, k) == '#').count();
            let close: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            let start = i;
            i += 2 + hashes;
            while i < chars.len() && !chars[i..].iter().collect::<String>().starts_with(&close) {
                i += 1;
            }
            i = (i + close.len()).min(chars.len());
            out.extend(chars[start..i].iter().map(|&c| blank(c)));
        } else if chars[i] == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                let skip = if chars[i] == '\\' { 2 } else { 1 };
                for _ in 0..skip {
                    if i < chars.len() {
                        out.push(blank(chars[i]));
                        i += 1;
                    }
                }
            }
            out.push(' ');
            i += 1;
        } else if chars[i] == '\'' && (peek(i, 2) == '\'' || peek(i, 1) == '\\') {
            // A character literal ('x', '\n', '\u{1F600}'); a lifetime has no closing quote.
            let end = (i + 1..chars.len()).find(|&k| chars[k] == '\'' && k > i + 1).unwrap_or(i);
            out.extend(chars[i..=end].iter().map(|&c| blank(c)));
            i = end + 1;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// A path as written after `crate::` (or after `super::` reaching the crate
/// root): the modules it names, with the byte offset where each starts.
/// Groups are followed (`crate::{a::x, b}` names `a` and `b`); a glob of the
/// crate root names everything, reported as `*`.
fn path_heads(code: &str, at: usize, out: &mut Vec<(usize, String)>) {
    let rest = &code[at..];
    let skipped = rest.len() - rest.trim_start().len();
    let (at, rest) = (at + skipped, rest.trim_start());
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 0;
        let mut start = at + 1;
        for (k, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    path_heads(code, start, out);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    path_heads(code, start, out);
                    start = at + 1 + k + 1;
                }
                _ => {}
            }
        }
    } else if rest.starts_with('*') {
        out.push((at, "*".into()));
    } else {
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if !name.is_empty() && name != "self" {
            out.push((at, name));
        }
    }
}

/// Every module of the crate a source file names, with its line: through
/// `crate::…` (groups, globs and paths broken over lines included), through
/// `super::` chains that climb to the crate root, and `crate` aliased with
/// `as` (reported as `as`, since an alias hides what it reaches).
/// `nested` is how deep the file's own module sits: 1 for `x.rs` and
/// `x/mod.rs`, 2 for `x/y.rs`.
fn named(text: &str, nested: usize) -> Vec<(usize, String)> {
    let code = code_only(text);
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let word_at = |at: usize, word: &str| {
        code[at..].starts_with(word)
            && !code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
            && !code[at + word.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
    };
    let after_colons = |at: usize| {
        let rest = &code[at..];
        let trimmed = rest.trim_start();
        trimmed.strip_prefix("::").map(|after| at + (rest.len() - after.len()))
    };
    let mut heads = Vec::new();
    // Inline modules (`mod tests { … }`) sit one level deeper than their file.
    let mut inline: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    let bytes = code.as_bytes();
    let mut at = 0;
    while at < code.len() {
        if !code.is_char_boundary(at) {
            at += 1;
            continue;
        }
        match bytes[at] {
            b'{' => depth += 1,
            b'}' => {
                depth = depth.saturating_sub(1);
                if inline.last() == Some(&depth) {
                    inline.pop();
                }
            }
            _ => {}
        }
        if word_at(at, "mod") {
            let rest = code[at + 3..].trim_start();
            let name_len = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').count();
            if rest[name_len..].trim_start().starts_with('{') {
                inline.push(depth);
            }
        } else if word_at(at, "crate") {
            match after_colons(at + "crate".len()) {
                Some(path) => path_heads(&code, path, &mut heads),
                None if code[at + "crate".len()..].trim_start().starts_with("as ") => heads.push((at, "as".into())),
                None => {}
            }
        } else if word_at(at, "super") {
            // A chain of `super::`: as many levels as the chain, from where it is written.
            let mut levels = 0;
            let mut next = at;
            while word_at(next, "super") {
                match after_colons(next + "super".len()) {
                    Some(after) => {
                        levels += 1;
                        next = after + (code[after..].len() - code[after..].trim_start().len());
                    }
                    None => break,
                }
            }
            if levels > 0 && levels == nested + inline.len() {
                path_heads(&code, next, &mut heads);
            }
            at = next.max(at + 1);
            continue;
        }
        at += 1;
    }
    heads.into_iter().map(|(at, name)| (line_of(at), name)).collect()
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
        let nested = if path.components().count() > 1 && !path.ends_with("mod.rs") { 2 } else { 1 };
        for (line, other) in named(text, nested) {
            if other == own {
                continue;
            }
            match layers.get(&other) {
                Some(&layer) if layer < own_layer => {}
                Some(&layer) => out.push(format!(
                    "{}:{line}: `{own}` (layer {own_layer}) imports `{other}` (layer {layer}); only lower layers may be imported",
                    path.display()
                )),
                None if other == "*" => out.push(format!("{}:{line}: a glob of the crate root hides what it imports", path.display())),
                None if other == "as" => out.push(format!("{}:{line}: `crate` aliased hides what it imports", path.display())),
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
fn an_import_up_or_sideways_is_caught_however_it_is_written() {
    let (lib, files) = kernel();
    let layers = layers(&lib);
    // Each case: a file, a line planted in it, and what the check must say.
    let cases: [(&str, &str, Option<&str>); 14] = [
        // Up: the content store reaching for recall's index.
        ("content.rs", "use crate::recall::Index;", Some("imports `recall`")),
        // Sideways: the planner and the index share a layer and know nothing of each other.
        ("planner/budget.rs", "fn f() { crate::index::terms(\"x\"); }", Some("imports `index`")),
        ("store.rs", "use crate::{error, memory::load};", Some("imports `memory`")),
        ("store.rs", "use crate::{contracts::{Head, Scope}, memory::load};", Some("imports `memory`")),
        ("store.rs", "use crate::{\n    error::Result,\n    recall,\n};", Some("imports `recall`")),
        ("store.rs", "fn f() { crate\n    ::recall::resident; }", Some("imports `recall`")),
        ("planner/budget.rs", "use super::super::index::terms;", Some("imports `index`")),
        ("content.rs", "use super::recall::Index;", Some("imports `recall`")),
        ("content.rs", "mod inner { use super::super::recall::Index; }", Some("imports `recall`")),
        ("store.rs", "use crate::*;", Some("a glob of the crate root")),
        ("store.rs", "use crate as k;", Some("`crate` aliased")),
        // Not imports: comments, strings, and a module's own items.
        ("tokens.rs", "// see crate::commands for the callers\n/* and crate::recall */", None),
        ("tokens.rs", "const S: &str = \"http://x crate::commands\"; const R: &str = r#\"crate::recall\"#;", None),
        ("planner/budget.rs", "use super::units::Unit; mod t { use super::*; }", None),
    ];
    for (file, line, expected) in cases {
        let mut planted = files.clone();
        let entry = planted.iter_mut().find(|(p, _)| p == Path::new(file)).expect("the file exists");
        entry.1.push('\n');
        entry.1.push_str(line);
        let found = violations(&layers, &planted);
        match expected {
            Some(what) => assert!(
                found.len() == 1 && found[0].starts_with(&format!("{file}:")) && found[0].contains(what),
                "{line:?} in {file}: {found:#?}"
            ),
            None => assert!(found.is_empty(), "{line:?} in {file}: {found:#?}"),
        }
    }
}

#[test]
fn a_module_outside_the_layers_is_caught() {
    let (lib, mut files) = kernel();
    files.push((PathBuf::from("inspector/mod.rs"), "use crate::error::Result;\n".into()));
    let found = violations(&layers(&lib), &files);
    assert_eq!(found, vec!["inspector/mod.rs: module `inspector` is in no layer of lib.rs".to_string()]);
}
