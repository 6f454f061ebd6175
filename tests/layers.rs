//! The crate's layers, checked statically (issue 42, item 1).
//!
//! The layer order (HACKING.md, "Layers", states it too):
//!
//! | layer | modules |
//! |---|---|
//! | 0 | `sys` |
//! | 1 | `g`, `p`, `m`, `tracer`, `traceback` (Go's runtime2 knot: they may name each other) |
//! | 2 | `runtime`, `netpoll` (the scheduler polls the network, as Go's runtime does) |
//! | 3 | `chan`, `sync`, `time`, `net`, `spawn`, `block_on`, `local`, `context`, `signal`, `io`, `spans`, `trace` (the tracer's public control), `synctest` |
//! | 4 | the public API: `lib.rs`'s own items (`crate::yield_now`), and items it re-exports when named through the root by another module (`crate::go` outside `spawn`) |
//!
//! `cacheline` and `loom` are leaves every layer may use.
//!
//! A module may name its own layer and the ones below it. A lower layer
//! reaches a higher one only through a hook registered at start, so this
//! test fails when a file of a lower layer names a higher module (a path
//! `crate::x::..`, or `super::..` that climbs to one), outside test code
//! (`#[cfg(test)]`, `#[cfg(loom)]` items). Doc comments do not count;
//! macro bodies do (their tokens are read too), except `$crate` paths and
//! `super` paths in `macro_rules!` bodies, which resolve where the macro is
//! used.
//!
//! A tie that must run up would be listed in [`ALLOWED`], with its reason
//! (none is today). The list only shrinks: a new tie fails, and so does an
//! entry that no longer names a tie (remove it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;

/// The layer of a top-level module of the crate, `None` for the leaves
/// anyone may use. `API` is the crate root's own items.
fn layer(top: &str) -> Option<u8> {
    Some(match top {
        "sys" => 0,
        "g" | "p" | "m" | "tracer" | "traceback" => 1,
        "runtime" | "netpoll" => 2,
        "chan" | "sync" | "time" | "net" | "spawn" | "block_on" | "local" | "context"
        | "signal" | "io" | "spans" | "trace" | "synctest" => 3,
        "cacheline" | "loom" => return None,
        _ => API,
    })
}

const API: u8 = 4;

/// Upward ties that exist today: (file, the module it names, why). Each is
/// a debt to cut (issue 42), not a licence: HACKING.md would name the ones
/// meant to stay. Empty since the timer heap's channel and the P's timer
/// kits were type-erased (`chan::timechan`).
const ALLOWED: &[(&str, &str, &str)] = &[];

/// The crate's top-level modules (the `mod` items of `lib.rs`), and the
/// names `lib.rs` re-exports with the module each comes from.
fn top_modules(src: &Path) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let text = std::fs::read_to_string(src.join("lib.rs")).expect("read lib.rs");
    let file = syn::parse_file(&text).expect("parse lib.rs");
    let mut mods = BTreeSet::new();
    let mut reexports = BTreeMap::new();
    for item in &file.items {
        match item {
            syn::Item::Mod(m) => {
                mods.insert(m.ident.to_string());
            }
            syn::Item::Use(u) if matches!(u.vis, syn::Visibility::Public(_)) => {
                if let syn::UseTree::Path(p) = &u.tree {
                    let from = p.ident.to_string();
                    let mut names = Vec::new();
                    use_names(&p.tree, &mut names);
                    for n in names {
                        reexports.insert(n, from.clone());
                    }
                }
            }
            _ => {}
        }
    }
    (mods, reexports)
}

/// The names a use tree brings in.
fn use_names(t: &syn::UseTree, out: &mut Vec<String>) {
    match t {
        syn::UseTree::Path(p) => use_names(&p.tree, out),
        syn::UseTree::Name(n) => out.push(n.ident.to_string()),
        syn::UseTree::Rename(r) => out.push(r.rename.to_string()),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_names(t, out)),
        syn::UseTree::Glob(_) => {}
    }
}

/// Whether an item is test-only (`#[cfg(test)]`, `#[cfg(loom)]`, or a
/// `cfg(all(..))`/`cfg(any(..))` naming either).
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        if !a.path().is_ident("cfg") {
            return false;
        }
        let Ok(list) = a.meta.require_list() else {
            return false;
        };
        let toks = list.tokens.to_string();
        let words: Vec<&str> = toks
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .collect();
        (words.contains(&"test") || words.contains(&"loom")) && !toks.starts_with("not")
    })
}

/// The tokens of a file less its test-only items and doc attributes.
fn code_tokens(items: &[syn::Item], out: &mut TokenStream) {
    for item in items {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            syn::Item::Union(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            _ => &[],
        };
        if test_only(attrs) {
            continue;
        }
        match item {
            syn::Item::Mod(m) => {
                if let Some((_, inner)) = &m.content {
                    code_tokens(inner, out);
                }
            }
            syn::Item::Impl(i) => {
                let mut i = i.clone();
                i.items.retain(|it| match it {
                    syn::ImplItem::Fn(f) => !test_only(&f.attrs),
                    syn::ImplItem::Const(c) => !test_only(&c.attrs),
                    _ => true,
                });
                strip_docs(i.to_token_stream(), out);
            }
            syn::Item::Macro(m) if m.mac.path.is_ident("macro_rules") => {
                // `super` resolves where the macro is used: blank it out.
                let mut body = TokenStream::new();
                strip_docs(m.to_token_stream(), &mut body);
                out.extend(blank_super(body));
            }
            other => strip_docs(other.to_token_stream(), out),
        }
    }
}

/// `ts` with every `super` replaced by a name no path resolves.
fn blank_super(ts: TokenStream) -> TokenStream {
    ts.into_iter()
        .map(|t| match t {
            TokenTree::Ident(id) if id == "super" => {
                TokenTree::Ident(proc_macro2::Ident::new("macro_super", id.span()))
            }
            TokenTree::Group(g) => {
                let mut ng = proc_macro2::Group::new(g.delimiter(), blank_super(g.stream()));
                ng.set_span(g.span());
                TokenTree::Group(ng)
            }
            t => t,
        })
        .collect()
}

/// Copies `ts` into `out` without `#[doc = ".."]` attributes.
fn strip_docs(ts: TokenStream, out: &mut TokenStream) {
    let toks: Vec<TokenTree> = ts.into_iter().collect();
    let mut i = 0;
    while i < toks.len() {
        if let TokenTree::Punct(p) = &toks[i] {
            if p.as_char() == '#' {
                if let Some(TokenTree::Group(g)) = toks.get(i + 1) {
                    let is_doc = g
                        .stream()
                        .into_iter()
                        .next()
                        .is_some_and(|t| t.to_string() == "doc");
                    if is_doc {
                        i += 2;
                        continue;
                    }
                }
            }
        }
        match &toks[i] {
            TokenTree::Group(g) => {
                let mut inner = TokenStream::new();
                strip_docs(g.stream(), &mut inner);
                let mut ng = proc_macro2::Group::new(g.delimiter(), inner);
                ng.set_span(g.span());
                out.extend([TokenTree::Group(ng)]);
            }
            t => out.extend([t.clone()]),
        }
        i += 1;
    }
}

/// Every `crate::x` and `super::..::x` path in `ts`, resolved against the
/// file's module path `here`, as (top-level module or root item, line).
fn named_tops(ts: TokenStream, here: &[String], found: &mut Vec<(String, usize)>) {
    let toks: Vec<TokenTree> = ts.into_iter().collect();
    let is_sep = |i: usize| {
        matches!((toks.get(i), toks.get(i + 1)),
            (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) if a.as_char() == ':' && b.as_char() == ':')
    };
    let ident = |i: usize| match toks.get(i) {
        Some(TokenTree::Ident(id)) => Some(id.to_string()),
        _ => None,
    };
    let mut i = 0;
    while i < toks.len() {
        if let TokenTree::Group(g) = &toks[i] {
            named_tops(g.stream(), here, found);
            i += 1;
            continue;
        }
        // Not the tail of a longer path, nor `$crate`.
        let preceded = (i >= 2 && is_sep(i - 2))
            || (i >= 1 && matches!(&toks[i - 1], TokenTree::Punct(p) if p.as_char() == '$'));
        match ident(i).as_deref() {
            Some("crate") if !preceded && is_sep(i + 1) => {
                // `crate::{a, b}` names each.
                match (ident(i + 3), toks.get(i + 3)) {
                    (Some(name), _) => found.push((name, toks[i + 3].span().start().line)),
                    (None, Some(TokenTree::Group(g))) => {
                        for t in g.stream() {
                            if let TokenTree::Ident(id) = t {
                                found.push((id.to_string(), g.span().start().line));
                            }
                        }
                    }
                    _ => {}
                }
                i += 3;
            }
            Some("super") if !preceded => {
                let mut depth = 1;
                let mut j = i;
                while is_sep(j + 1) && ident(j + 3).as_deref() == Some("super") {
                    depth += 1;
                    j += 3;
                }
                if depth <= here.len() {
                    let base = &here[..here.len() - depth];
                    if base.is_empty() {
                        // Climbed to the crate root: the next segment is the top.
                        if is_sep(j + 1) {
                            if let Some(name) = ident(j + 3) {
                                found.push((name, toks[j + 3].span().start().line));
                            }
                        }
                    } else {
                        found.push((base[0].clone(), toks[i].span().start().line));
                    }
                }
                i = j + 1;
            }
            _ => i += 1,
        }
    }
}

/// The module path of a source file (`src/g/stack.rs` -> [g, stack]).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|l| l == "mod") {
        parts.pop();
    }
    parts
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read_dir") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// One source file of the crate that is not test code: its path relative
/// to the crate root, its module path and its code tokens (test-only items
/// and doc comments left out).
struct CodeFile {
    rel: String,
    here: Vec<String>,
    tokens: TokenStream,
}

/// The crate's code files. A file that is a test module as a whole (its
/// `mod x;` declaration is test-only, as `#[cfg(test)] mod tests;` or
/// `#[cfg(all(test, loom))] mod loom_models;`) is left out, with the files
/// below it.
fn code_files() -> Vec<CodeFile> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    files.sort();
    let mut parsed = Vec::new();
    let mut test_mods: BTreeSet<Vec<String>> = BTreeSet::new();
    for file in files {
        let here = module_path(&src, &file);
        let text = std::fs::read_to_string(&file).expect("read source");
        let ast =
            syn::parse_file(&text).unwrap_or_else(|e| panic!("parse {}: {e}", file.display()));
        for item in &ast.items {
            if let syn::Item::Mod(m) = item {
                if m.content.is_none() && test_only(&m.attrs) {
                    let mut p = here.clone();
                    p.push(m.ident.to_string());
                    test_mods.insert(p);
                }
            }
        }
        parsed.push((file, here, ast));
    }
    let mut out = Vec::new();
    for (file, here, ast) in parsed {
        if test_mods.iter().any(|t| here.starts_with(t)) {
            continue;
        }
        let mut tokens = TokenStream::new();
        code_tokens(&ast.items, &mut tokens);
        let rel = file.strip_prefix(root).unwrap().display().to_string();
        out.push(CodeFile { rel, here, tokens });
    }
    out
}

/// Every upward tie outside test code: (file, named module, lines).
fn upward_ties() -> BTreeMap<(String, String), Vec<usize>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (tops, reexports) = top_modules(&src);
    let mut ties: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for f in code_files() {
        let Some(own) = f.here.first() else { continue };
        if !tops.contains(own) {
            continue; // lib.rs itself, or a file no `mod` includes
        }
        let Some(own_layer) = layer(own) else {
            continue;
        };
        let mut found = Vec::new();
        named_tops(f.tokens, &f.here, &mut found);
        for (name, line) in found {
            let named_layer = if tops.contains(&name) {
                match layer(&name) {
                    Some(l) => l,
                    None => continue,
                }
            } else if reexports.get(&name) == Some(own) {
                continue; // its own item, through the root
            } else {
                API
            };
            if named_layer > own_layer {
                let target = if tops.contains(&name) {
                    name
                } else {
                    format!("crate::{name} (API)")
                };
                ties.entry((f.rel.clone(), target)).or_default().push(line);
            }
        }
    }
    ties
}

#[test]
fn lower_layers_never_name_higher_ones() {
    let ties = upward_ties();
    let allowed: BTreeSet<(String, String)> = ALLOWED
        .iter()
        .map(|(f, t, _)| (f.to_string(), t.to_string()))
        .collect();
    let mut new = Vec::new();
    for ((file, target), lines) in &ties {
        if !allowed.contains(&(file.clone(), target.clone())) {
            new.push(format!("  {file} names {target} (lines {lines:?})"));
        }
    }
    let stale: Vec<String> = allowed
        .iter()
        .filter(|k| !ties.contains_key(*k))
        .map(|(f, t)| format!("  {f} -> {t}"))
        .collect();
    assert!(
        new.is_empty() && stale.is_empty(),
        "layer violations (HACKING.md, \"Layers\"): a lower layer reaches a higher one only \
         through a hook registered at start.\nnew upward ties:\n{}\nallowed ties that no longer \
         exist (remove them from ALLOWED):\n{}",
        new.join("\n"),
        stale.join("\n")
    );
}

/// The scanner itself: it finds a tie in code, and none in docs or tests.
#[test]
fn scanner_sees_code_and_skips_docs_and_tests() {
    let text = r#"
        /// crate::runtime::x in a doc comment
        fn f() { crate::runtime::park(); super::super::chan::x(); crate::go(|| ()); }
        #[cfg(test)]
        mod tests { fn t() { crate::sync::Mutex::new(()); } }
        macro_rules! m { () => { crate::time::sleep(); $crate::spawn::go(); super::fd::x() } }
        use crate::{sys, net};
    "#;
    let parsed = syn::parse_file(text).unwrap();
    let mut ts = TokenStream::new();
    code_tokens(&parsed.items, &mut ts);
    let mut found = Vec::new();
    named_tops(ts, &["g".to_string(), "stack".to_string()], &mut found);
    let names: BTreeSet<String> = found.into_iter().map(|(n, _)| n).collect();
    let want: BTreeSet<String> = ["runtime", "chan", "go", "time", "sys", "net"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(names, want);
}

// ---------------------------------------------------------------- the import graph

/// The largest import cycle allowed, in files (measured by
/// [`import_graph`]). With no upward tie left, the largest cycle is the
/// scheduler's own package: `runtime`'s files (and `netpoll`, which the
/// scheduler polls and which readies goroutines through it), as Go's
/// `runtime` package is one unit whose files name each other. The G, P and
/// M records below it form no cycle with it. The bound only goes down.
const MAX_CYCLE: usize = 23;

/// Every module path named in `ts` (`crate::a::b`, `super::a`, `self::a`,
/// and each leaf of a `use` group), resolved against the file's module
/// path `here`.
fn named_paths(ts: TokenStream, here: &[String], out: &mut Vec<Vec<String>>) {
    let toks: Vec<TokenTree> = ts.into_iter().collect();
    let is_sep = |i: usize| {
        matches!((toks.get(i), toks.get(i + 1)),
            (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) if a.as_char() == ':' && b.as_char() == ':')
    };
    let ident = |i: usize| match toks.get(i) {
        Some(TokenTree::Ident(id)) => Some(id.to_string()),
        _ => None,
    };
    let mut i = 0;
    while i < toks.len() {
        if let TokenTree::Group(g) = &toks[i] {
            named_paths(g.stream(), here, out);
            i += 1;
            continue;
        }
        let preceded = (i >= 2 && is_sep(i - 2))
            || (i >= 1 && matches!(&toks[i - 1], TokenTree::Punct(p) if p.as_char() == '$'));
        let start = match ident(i).as_deref() {
            Some("crate") if !preceded && is_sep(i + 1) => Some((Vec::new(), i + 3)),
            Some("self") if !preceded && is_sep(i + 1) => Some((here.to_vec(), i + 3)),
            Some("super") if !preceded => {
                let mut depth = 1;
                let mut j = i;
                while is_sep(j + 1) && ident(j + 3).as_deref() == Some("super") {
                    depth += 1;
                    j += 3;
                }
                (depth <= here.len() && is_sep(j + 1))
                    .then(|| (here[..here.len() - depth].to_vec(), j + 3))
            }
            _ => None,
        };
        match start {
            Some((prefix, j)) => i = path_from(&toks, j, prefix, out),
            None => i += 1,
        }
    }
}

/// Reads the path that starts at `toks[j]` below `prefix` (segments, then
/// maybe a `{..}` group of further paths); returns the index after it.
fn path_from(
    toks: &[TokenTree],
    mut j: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        match toks.get(j) {
            Some(TokenTree::Ident(id)) => {
                let name = id.to_string();
                if name != "self" {
                    prefix.push(name);
                }
                let sep = matches!((toks.get(j + 1), toks.get(j + 2)),
                    (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) if a.as_char() == ':' && b.as_char() == ':');
                if !sep {
                    out.push(prefix);
                    return j + 1;
                }
                j += 3;
            }
            Some(TokenTree::Group(g)) if g.delimiter() == proc_macro2::Delimiter::Brace => {
                let inner: Vec<TokenTree> = g.stream().into_iter().collect();
                for piece in inner.split(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ','))
                {
                    if !piece.is_empty() {
                        path_from(piece, 0, prefix.clone(), out);
                    }
                }
                return j + 1;
            }
            _ => {
                out.push(prefix);
                return j;
            }
        }
    }
}

/// The file-level import graph of the crate's code: for each file, the
/// files whose modules it names. A named path resolves to the longest
/// prefix that is a file's module (`crate::g::stack::Stack` -> g/stack).
/// `lib.rs` (the API) is left out: it names everything by design.
fn import_graph() -> (Vec<String>, Vec<BTreeSet<usize>>) {
    let files: Vec<CodeFile> = code_files()
        .into_iter()
        .filter(|f| f.here != ["lib"])
        .collect();
    let index: BTreeMap<Vec<String>, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.here.clone(), i))
        .collect();
    let mut edges = vec![BTreeSet::new(); files.len()];
    for (i, f) in files.iter().enumerate() {
        let mut paths = Vec::new();
        named_paths(f.tokens.clone(), &f.here, &mut paths);
        for p in paths {
            let target = (1..=p.len()).rev().find_map(|n| index.get(&p[..n]));
            if let Some(&t) = target {
                if t != i {
                    edges[i].insert(t);
                }
            }
        }
    }
    (files.into_iter().map(|f| f.rel).collect(), edges)
}

/// The strongly connected components of a graph (Tarjan), largest first.
fn components(edges: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    struct T<'a> {
        edges: &'a [BTreeSet<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(t: &mut T<'_>, v: usize) {
        t.index[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in t.edges[v].iter() {
            match t.index[w] {
                None => {
                    visit(t, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut c = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on[w] = false;
                c.push(w);
                if w == v {
                    break;
                }
            }
            t.out.push(c);
        }
    }
    let n = edges.len();
    let mut t = T {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            visit(&mut t, v);
        }
    }
    t.out.sort_by_key(|c| std::cmp::Reverse(c.len()));
    t.out
}

/// The largest import cycle stays Go's runtime2 knot. Prints the graph's
/// figures (`cargo test --test layers -- --nocapture`): files, the largest
/// cycle and its members, upward ties, the biggest file.
#[test]
fn largest_import_cycle_is_bounded() {
    let (files, edges) = import_graph();
    let comps = components(&edges);
    let largest = &comps[0];
    let mut members: Vec<&str> = largest.iter().map(|&i| files[i].as_str()).collect();
    members.sort();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let biggest = files
        .iter()
        .map(|f| {
            let n = std::fs::read_to_string(root.join(f))
                .unwrap()
                .lines()
                .count();
            (n, f.as_str())
        })
        .max()
        .unwrap();
    println!(
        "import graph: {} files, {} edges; largest cycle {} files ({}%); upward ties {}; \
         biggest file {} ({} lines)\ncycle: {}",
        files.len(),
        edges.iter().map(BTreeSet::len).sum::<usize>(),
        largest.len(),
        largest.len() * 100 / files.len(),
        upward_ties().len(),
        biggest.1,
        biggest.0,
        members.join(" ")
    );
    assert!(
        largest.len() <= MAX_CYCLE,
        "the largest import cycle has {} files, more than {MAX_CYCLE} (HACKING.md, \"Layers\"): \
         {}",
        largest.len(),
        members.join(" ")
    );
}
