//! The entry gate, checked statically (issue 17, item 4).
//!
//! `src/runtime/entry.rs` is the one gate every public runtime call runs its
//! body through (`entry::call`, or `entry::call_here`). A public function
//! that reaches runtime state without it is caught at run time only by a
//! debug assertion, and only on the paths a test happens to take. This test
//! reads the library's source with `syn` and lists every function of the
//! public API that
//! - does not call the gate itself (a call whose path ends in `entry::call`,
//!   or in a name `entry::call` is imported as, e.g. `in_runtime`),
//! - does not delegate to a function of the crate that does (transitively),
//! - and carries no `// entry: <reason>` comment (in its doc/attribute block
//!   or its body) saying why it needs no gate: a pure getter, a constructor
//!   that touches no runtime state, a plain system call on a descriptor.
//!
//! The public API: `pub` functions reachable from the crate root (in `pub`
//! modules, or re-exported by `pub use`), `pub` methods of inherent impls of
//! public types, and every method of their `Read`, `Write`, `Drop`, `Future`
//! and `Iterator` impls (and the few close relatives in [`CHECKED_TRAITS`]).
//!
//! Delegation is judged by name, conservatively: a call counts only if every
//! function of the crate it may name is gated. A method call on `self` or on
//! a field of `self` is narrowed to the methods of that type (the field's
//! declared type, seen through `Arc`/`Box`/`Rc`/`Pin`); any other method call
//! must be gated under every type that has a method of that name.
//!
//! Items under `#[cfg(test)]` or `#[cfg(loom)]` are skipped, and so is code
//! that macros generate (none of the public API is generated today).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// Trait impls whose methods are public entry points of a public type.
const CHECKED_TRAITS: &[&str] = &[
    "Read",
    "Write",
    "Drop",
    "Future",
    "Iterator",
    "DoubleEndedIterator",
    "BufRead",
    "Seek",
];

/// Smart pointers a method call sees through (auto-deref) when the
/// receiver's type is a field's declared type.
const DEREF_WRAPPERS: &[&str] = &["Arc", "Box", "Rc", "Pin", "ManuallyDrop"];

// ---------------------------------------------------------------- modules

struct Module {
    file: String,
    parent: Option<usize>,
    declared_pub: bool,
    children: HashMap<String, usize>,
    items: Vec<syn::Item>,
    /// Local name -> (path, is `pub use`).
    uses: HashMap<String, (Vec<String>, bool)>,
    /// Glob imports: (path, is `pub use`).
    globs: Vec<(Vec<String>, bool)>,
    /// Names this module defines (fn, struct, enum, union, trait, type, const, static).
    defined: HashMap<String, bool>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Target {
    Module(usize),
    Item(usize, String),
}

struct Crate {
    modules: Vec<Module>,
    /// File name -> its text (for line comments, which syn drops).
    texts: HashMap<String, String>,
}

fn skipped(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        if !a.path().is_ident("cfg") {
            return false;
        }
        let Ok(list) = a.meta.require_list() else {
            return false;
        };
        let t: String = list
            .tokens
            .to_string()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        t == "test" || t == "loom" || t.starts_with("all(test") || t.starts_with("all(loom")
    })
}

fn is_pub(vis: &syn::Visibility) -> bool {
    matches!(vis, syn::Visibility::Public(_))
}

fn flatten_use(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(String, Vec<String>)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                if let Some(last) = prefix.last() {
                    out.push((last.clone(), prefix.clone()));
                }
            } else {
                let mut p = prefix.clone();
                p.push(name.clone());
                out.push((name, p));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut p = prefix.clone();
            let name = r.ident.to_string();
            if name != "self" {
                p.push(name);
            }
            out.push((r.rename.to_string(), p));
        }
        syn::UseTree::Glob(_) => out.push(("*".into(), prefix.clone())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix, out);
            }
        }
    }
}

impl Crate {
    /// Loads the crate whose root file is `root` (e.g. `src/lib.rs`); `read`
    /// gives a file's text by path.
    fn load(root: &str, read: &dyn Fn(&str) -> Option<String>) -> Result<Crate, String> {
        let mut c = Crate {
            modules: Vec::new(),
            texts: HashMap::new(),
        };
        let text = read(root).ok_or_else(|| format!("cannot read {root}"))?;
        let file = syn::parse_file(&text).map_err(|e| format!("{root}: {e}"))?;
        c.texts.insert(root.to_string(), text);
        let dir = Path::new(root)
            .parent()
            .unwrap_or(Path::new(""))
            .to_path_buf();
        c.add_module(
            Vec::new(),
            root.to_string(),
            None,
            true,
            file.items,
            dir,
            read,
        )?;
        Ok(c)
    }

    #[allow(clippy::too_many_arguments)]
    fn add_module(
        &mut self,
        path: Vec<String>,
        file: String,
        parent: Option<usize>,
        declared_pub: bool,
        items: Vec<syn::Item>,
        dir: PathBuf,
        read: &dyn Fn(&str) -> Option<String>,
    ) -> Result<usize, String> {
        let idx = self.modules.len();
        self.modules.push(Module {
            file: file.clone(),
            parent,
            declared_pub,
            children: HashMap::new(),
            items: Vec::new(),
            uses: HashMap::new(),
            globs: Vec::new(),
            defined: HashMap::new(),
        });
        let mut kept = Vec::new();
        for item in items {
            let attrs: &[syn::Attribute] = match &item {
                syn::Item::Mod(m) => &m.attrs,
                syn::Item::Fn(f) => &f.attrs,
                syn::Item::Impl(i) => &i.attrs,
                syn::Item::Use(u) => &u.attrs,
                syn::Item::Struct(s) => &s.attrs,
                syn::Item::Enum(e) => &e.attrs,
                _ => &[],
            };
            if skipped(attrs) {
                continue;
            }
            match &item {
                syn::Item::Mod(m) => {
                    let name = m.ident.to_string();
                    let mut cpath = path.clone();
                    cpath.push(name.clone());
                    let cdir = dir.join(&name);
                    let child = if let Some((_, content)) = &m.content {
                        self.add_module(
                            cpath,
                            file.clone(),
                            Some(idx),
                            is_pub(&m.vis),
                            content.clone(),
                            cdir,
                            read,
                        )?
                    } else {
                        let a = dir.join(format!("{name}.rs"));
                        let b = cdir.join("mod.rs");
                        let (f, text) = [a, b]
                            .iter()
                            .find_map(|p| {
                                let p = p.to_string_lossy().into_owned();
                                read(&p).map(|t| (p, t))
                            })
                            .ok_or_else(|| format!("{file}: no file for `mod {name};`"))?;
                        let parsed = syn::parse_file(&text).map_err(|e| format!("{f}: {e}"))?;
                        self.texts.insert(f.clone(), text);
                        self.add_module(
                            cpath,
                            f,
                            Some(idx),
                            is_pub(&m.vis),
                            parsed.items,
                            cdir,
                            read,
                        )?
                    };
                    self.modules[idx].children.insert(name, child);
                }
                syn::Item::Use(u) => {
                    let mut flat = Vec::new();
                    flatten_use(&u.tree, &mut Vec::new(), &mut flat);
                    for (name, p) in flat {
                        if name == "*" {
                            self.modules[idx].globs.push((p, is_pub(&u.vis)));
                        } else if name != "_" {
                            self.modules[idx].uses.insert(name, (p, is_pub(&u.vis)));
                        }
                    }
                }
                _ => {
                    let named = match &item {
                        syn::Item::Fn(f) => Some((f.sig.ident.to_string(), is_pub(&f.vis))),
                        syn::Item::Struct(s) => Some((s.ident.to_string(), is_pub(&s.vis))),
                        syn::Item::Enum(e) => Some((e.ident.to_string(), is_pub(&e.vis))),
                        syn::Item::Union(u) => Some((u.ident.to_string(), is_pub(&u.vis))),
                        syn::Item::Trait(t) => Some((t.ident.to_string(), is_pub(&t.vis))),
                        syn::Item::Type(t) => Some((t.ident.to_string(), is_pub(&t.vis))),
                        syn::Item::Const(c) => Some((c.ident.to_string(), is_pub(&c.vis))),
                        syn::Item::Static(s) => Some((s.ident.to_string(), is_pub(&s.vis))),
                        _ => None,
                    };
                    if let Some((n, p)) = named {
                        self.modules[idx].defined.insert(n, p);
                    }
                }
            }
            kept.push(item);
        }
        self.modules[idx].items = kept;
        Ok(idx)
    }

    /// Resolves `segs` as written in module `m` (items, modules, `use`s).
    fn resolve(&self, m: usize, segs: &[String], depth: usize) -> Option<Target> {
        if depth > 16 || segs.is_empty() {
            return None;
        }
        let mut cur = m;
        let mut i = 0;
        match segs[0].as_str() {
            "crate" => {
                cur = 0;
                i = 1;
            }
            "self" => i = 1,
            "super" => {}
            _ => {}
        }
        while i < segs.len() {
            let s = &segs[i];
            let last = i + 1 == segs.len();
            if s == "super" {
                cur = self.modules[cur].parent?;
            } else if s == "self" {
            } else if let Some(&c) = self.modules[cur].children.get(s) {
                cur = c;
            } else if self.modules[cur].defined.contains_key(s) {
                return last.then(|| Target::Item(cur, s.clone()));
            } else if let Some((p, _)) = self.modules[cur].uses.get(s) {
                let mut full = p.clone();
                full.extend_from_slice(&segs[i + 1..]);
                return self.resolve(cur, &full, depth + 1);
            } else {
                for (g, _) in &self.modules[cur].globs {
                    let mut full = g.clone();
                    full.extend_from_slice(&segs[i..]);
                    if let Some(t) = self.resolve(cur, &full, depth + 1) {
                        return Some(t);
                    }
                }
                return None;
            }
            i += 1;
        }
        Some(Target::Module(cur))
    }

    /// The items (and modules) reachable from outside the crate.
    fn public(&self) -> HashSet<Target> {
        let mut public: HashSet<Target> = HashSet::new();
        public.insert(Target::Module(0));
        loop {
            let before = public.len();
            for (idx, m) in self.modules.iter().enumerate() {
                if !public.contains(&Target::Module(idx)) {
                    continue;
                }
                for &c in m.children.values() {
                    if self.modules[c].declared_pub {
                        public.insert(Target::Module(c));
                    }
                }
                for (name, &p) in &m.defined {
                    if p {
                        public.insert(Target::Item(idx, name.clone()));
                    }
                }
                for (p, is_pub_use) in m.uses.values() {
                    if *is_pub_use {
                        if let Some(t) = self.resolve(idx, p, 0) {
                            public.insert(t);
                        }
                    }
                }
                for (p, is_pub_use) in &m.globs {
                    if !*is_pub_use {
                        continue;
                    }
                    if let Some(Target::Module(g)) = self.resolve(idx, p, 0) {
                        for (name, &p) in &self.modules[g].defined {
                            if p {
                                public.insert(Target::Item(g, name.clone()));
                            }
                        }
                        for &c in self.modules[g].children.values() {
                            if self.modules[c].declared_pub {
                                public.insert(Target::Module(c));
                            }
                        }
                    }
                }
            }
            if public.len() == before {
                return public;
            }
        }
    }
}

// ---------------------------------------------------------------- functions

#[derive(Debug)]
enum Recv {
    SelfValue,
    SelfField(String),
    Other,
}

#[derive(Debug)]
enum Call {
    Path(Vec<String>),
    Method(Recv, String),
}

struct Func {
    module: usize,
    /// Name of the impl's self type (last path segment).
    self_ty: Option<String>,
    self_target: Option<Target>,
    trait_name: Option<String>,
    name: String,
    vis_pub: bool,
    file: String,
    line: usize,
    end_line: usize,
    /// First line of the doc/attribute block above the `fn`.
    head_line: usize,
    /// For a method: the first line of the impl's attribute block and the
    /// line of its `impl` (a reason given there covers every method).
    impl_head: Option<(usize, usize)>,
    calls: Vec<Call>,
}

impl Func {
    fn display(&self) -> String {
        match (&self.self_ty, &self.trait_name) {
            (Some(t), Some(tr)) => format!("<{t} as {tr}>::{}", self.name),
            (Some(t), None) => format!("{t}::{}", self.name),
            _ => self.name.clone(),
        }
    }
}

#[derive(Default)]
struct Calls(Vec<Call>);

fn path_segs(p: &syn::Path) -> Vec<String> {
    p.segments.iter().map(|s| s.ident.to_string()).collect()
}

impl<'ast> Visit<'ast> for Calls {
    fn visit_expr_call(&mut self, e: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = &*e.func {
            self.0.push(Call::Path(path_segs(&p.path)));
        }
        syn::visit::visit_expr_call(self, e);
    }
    fn visit_expr_method_call(&mut self, e: &'ast syn::ExprMethodCall) {
        let recv = match &*e.receiver {
            syn::Expr::Path(p) if p.path.is_ident("self") => Recv::SelfValue,
            syn::Expr::Field(f) => match (&*f.base, &f.member) {
                (syn::Expr::Path(p), syn::Member::Named(n)) if p.path.is_ident("self") => {
                    Recv::SelfField(n.to_string())
                }
                _ => Recv::Other,
            },
            _ => Recv::Other,
        };
        self.0.push(Call::Method(recv, e.method.to_string()));
        syn::visit::visit_expr_method_call(self, e);
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        // Calls inside `assert!(..)`, `write!(..)` and the like.
        use syn::parse::Parser;
        let parser = syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        if let Ok(args) = parser.parse2(m.tokens.clone()) {
            for a in &args {
                self.visit_expr(a);
            }
        }
    }
}

/// The type a method call on a value of type `ty` dispatches on: the last
/// path segment, seen through references and [`DEREF_WRAPPERS`].
fn type_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Reference(r) => type_name(&r.elem),
        syn::Type::Paren(p) => type_name(&p.elem),
        syn::Type::Group(g) => type_name(&g.elem),
        syn::Type::Path(p) => {
            let last = p.path.segments.last()?;
            let name = last.ident.to_string();
            if DEREF_WRAPPERS.contains(&name.as_str()) {
                if let syn::PathArguments::AngleBracketed(a) = &last.arguments {
                    for arg in &a.args {
                        if let syn::GenericArgument::Type(t) = arg {
                            return type_name(t);
                        }
                    }
                }
            }
            Some(name)
        }
        _ => None,
    }
}

fn line_of(span: proc_macro2::Span) -> usize {
    span.start().line
}

fn attrs_head(attrs: &[syn::Attribute], fallback: usize) -> usize {
    attrs
        .iter()
        .map(|a| line_of(a.pound_token.span))
        .min()
        .unwrap_or(fallback)
        .min(fallback)
}

fn collect_funcs(c: &Crate) -> Vec<Func> {
    let mut out = Vec::new();
    for (idx, m) in c.modules.iter().enumerate() {
        for item in &m.items {
            match item {
                syn::Item::Fn(f) => {
                    let mut calls = Calls::default();
                    calls.visit_block(&f.block);
                    let line = line_of(f.sig.fn_token.span);
                    out.push(Func {
                        module: idx,
                        self_ty: None,
                        self_target: None,
                        trait_name: None,
                        name: f.sig.ident.to_string(),
                        vis_pub: is_pub(&f.vis),
                        file: m.file.clone(),
                        line,
                        end_line: f.block.brace_token.span.close().end().line,
                        head_line: attrs_head(&f.attrs, line),
                        impl_head: None,
                        calls: calls.0,
                    });
                }
                syn::Item::Impl(i) => {
                    let impl_line = line_of(i.impl_token.span);
                    let impl_head = Some((attrs_head(&i.attrs, impl_line), impl_line));
                    let Some(self_ty) = type_name(&i.self_ty) else {
                        continue;
                    };
                    let self_target = match &*i.self_ty {
                        syn::Type::Reference(r) => match &*r.elem {
                            syn::Type::Path(p) => c.resolve(idx, &path_segs(&p.path), 0),
                            _ => None,
                        },
                        syn::Type::Path(p) => c.resolve(idx, &path_segs(&p.path), 0),
                        _ => None,
                    };
                    let trait_name = i
                        .trait_
                        .as_ref()
                        .and_then(|(_, p, _)| p.segments.last())
                        .map(|s| s.ident.to_string());
                    for ii in &i.items {
                        let syn::ImplItem::Fn(f) = ii else { continue };
                        if skipped(&f.attrs) {
                            continue;
                        }
                        let mut calls = Calls::default();
                        calls.visit_block(&f.block);
                        let line = line_of(f.sig.fn_token.span);
                        out.push(Func {
                            module: idx,
                            self_ty: Some(self_ty.clone()),
                            self_target: self_target.clone(),
                            trait_name: trait_name.clone(),
                            name: f.sig.ident.to_string(),
                            vis_pub: is_pub(&f.vis),
                            file: m.file.clone(),
                            line,
                            end_line: f.block.brace_token.span.close().end().line,
                            head_line: attrs_head(&f.attrs, line),
                            impl_head,
                            calls: calls.0,
                        });
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// struct name -> field name -> the type name its methods dispatch on.
fn field_types(c: &Crate) -> HashMap<String, HashMap<String, String>> {
    let mut out: HashMap<String, HashMap<String, String>> = HashMap::new();
    for m in &c.modules {
        for item in &m.items {
            let syn::Item::Struct(s) = item else { continue };
            let fields = out.entry(s.ident.to_string()).or_default();
            for f in &s.fields {
                if let (Some(n), Some(t)) = (&f.ident, type_name(&f.ty)) {
                    fields.insert(n.to_string(), t);
                }
            }
        }
    }
    out
}

/// A `// entry: <reason>` comment in the function's doc/attribute block (or
/// just above it) or in its body, or above the `impl` block it belongs to.
fn justified(c: &Crate, f: &Func) -> bool {
    let Some(text) = c.texts.get(&f.file) else {
        return false;
    };
    let lines: Vec<&str> = text.lines().collect();
    let reason_in = |head: usize, end: usize| {
        // From the comment lines just above the block to `end` (1-based).
        let mut start = head.saturating_sub(1);
        while start > 0 && {
            let l = lines[start - 1].trim_start();
            l.starts_with("//") || l.starts_with("#[")
        } {
            start -= 1;
        }
        lines.iter().take(end).skip(start).any(|l| {
            l.trim_start()
                .strip_prefix("// entry:")
                .is_some_and(|reason| !reason.trim().is_empty())
        })
    };
    reason_in(f.head_line, f.end_line) || f.impl_head.is_some_and(|(h, l)| reason_in(h, l))
}

/// One public function that bypasses the gate.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Offender {
    file: String,
    line: usize,
    name: String,
}

/// Scans a loaded crate; returns the offenders, sorted.
fn scan(c: &Crate) -> Vec<Offender> {
    let public = c.public();
    let funcs = collect_funcs(c);
    let fields = field_types(c);

    // The gate's two forms: `entry::call`, and `entry::call_here` (which
    // hands the body the M it looked up).
    let gate_path = |p: &[String]| -> bool {
        ["call", "call_here"]
            .iter()
            .any(|f| p.ends_with(&["entry".to_string(), f.to_string()]))
    };
    // Names the gate is imported as (`use super::entry::call as in_runtime`).
    let mut gate_names: HashSet<String> = HashSet::new();
    for m in &c.modules {
        for (name, (p, _)) in &m.uses {
            if gate_path(p) {
                gate_names.insert(name.clone());
            }
        }
    }
    let is_gate = |segs: &[String]| -> bool {
        gate_path(segs) || segs.last().is_some_and(|l| gate_names.contains(l))
    };

    // Index: free fns by (module, name); methods by (type, name) and by name.
    let mut free: HashMap<(usize, String), Vec<usize>> = HashMap::new();
    let mut methods: HashMap<(String, String), Vec<usize>> = HashMap::new();
    let mut by_method_name: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, f) in funcs.iter().enumerate() {
        match &f.self_ty {
            None => free.entry((f.module, f.name.clone())).or_default().push(i),
            Some(t) => {
                methods
                    .entry((t.clone(), f.name.clone()))
                    .or_default()
                    .push(i);
                by_method_name.entry(f.name.clone()).or_default().push(i);
            }
        }
    }

    let candidates = |f: &Func, call: &Call| -> Vec<usize> {
        match call {
            Call::Path(segs) => {
                if let Some(Target::Item(m, name)) = c.resolve(f.module, segs, 0) {
                    if let Some(v) = free.get(&(m, name)) {
                        return v.clone();
                    }
                }
                if segs.len() >= 2 {
                    let q = &segs[segs.len() - 2];
                    let q = if q == "Self" {
                        f.self_ty.clone().unwrap_or_default()
                    } else {
                        q.clone()
                    };
                    if let Some(v) = methods.get(&(q, segs[segs.len() - 1].clone())) {
                        return v.clone();
                    }
                }
                Vec::new()
            }
            Call::Method(recv, name) => {
                let ty = match recv {
                    Recv::SelfValue => f.self_ty.clone(),
                    Recv::SelfField(field) => f
                        .self_ty
                        .as_ref()
                        .and_then(|t| fields.get(t))
                        .and_then(|fs| fs.get(field))
                        .cloned(),
                    Recv::Other => None,
                };
                match ty {
                    Some(t) => methods.get(&(t, name.clone())).cloned().unwrap_or_default(),
                    None => by_method_name.get(name).cloned().unwrap_or_default(),
                }
            }
        }
    };

    let cands: Vec<Vec<Vec<usize>>> = funcs
        .iter()
        .map(|f| f.calls.iter().map(|call| candidates(f, call)).collect())
        .collect();
    let mut gated: Vec<bool> = funcs
        .iter()
        .map(|f| {
            f.calls
                .iter()
                .any(|call| matches!(call, Call::Path(s) if is_gate(s)))
        })
        .collect();
    loop {
        let mut changed = false;
        for i in 0..funcs.len() {
            if gated[i] {
                continue;
            }
            if cands[i]
                .iter()
                .any(|cs| !cs.is_empty() && cs.iter().all(|&j| j != i && gated[j]))
            {
                gated[i] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }

    let mut out = Vec::new();
    for (i, f) in funcs.iter().enumerate() {
        let in_api = match (&f.self_target, &f.trait_name) {
            (_, _) if f.self_ty.is_none() => {
                public.contains(&Target::Item(f.module, f.name.clone()))
            }
            (Some(t), None) => f.vis_pub && public.contains(t),
            (Some(t), Some(tr)) => CHECKED_TRAITS.contains(&tr.as_str()) && public.contains(t),
            (None, _) => false,
        };
        if in_api && !gated[i] && !justified(c, f) {
            out.push(Offender {
                file: f.file.clone(),
                line: f.line,
                name: f.display(),
            });
        }
    }
    out.sort();
    out
}

fn scan_sources(files: &BTreeMap<&str, &str>) -> Vec<Offender> {
    let read = |p: &str| files.get(p).map(|s| s.to_string());
    scan(&Crate::load("src/lib.rs", &read).expect("parse"))
}

// ---------------------------------------------------------------- the test

#[test]
fn every_public_entry_point_passes_the_gate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).ok();
    let c = Crate::load("src/lib.rs", &read).unwrap_or_else(|e| panic!("{e}"));
    // The scan must see the API at all (a broken module walk would find
    // nothing and pass).
    let public = c.public();
    let funcs = collect_funcs(&c);
    let api = funcs
        .iter()
        .filter(|f| match &f.self_target {
            _ if f.self_ty.is_none() => public.contains(&Target::Item(f.module, f.name.clone())),
            Some(t) => public.contains(t),
            None => false,
        })
        .count();
    assert!(
        api > 100,
        "only {api} public functions found: the module walk is broken"
    );
    for must in ["go", "chan", "yield_now", "sleep"] {
        assert!(
            funcs.iter().any(|f| f.self_ty.is_none()
                && f.name == must
                && public.contains(&Target::Item(f.module, f.name.clone()))),
            "`{must}` not found among the public functions"
        );
    }

    let offenders = scan(&c);
    assert!(
        offenders.is_empty(),
        "{} public functions bypass the entry gate (src/runtime/entry.rs): run the body \
         through `runtime::entry::call`, delegate to a gated function, or say why no gate \
         is needed with a `// entry: <reason>` comment:\n{}",
        offenders.len(),
        offenders
            .iter()
            .map(|o| format!("  {}:{}: {}", o.file, o.line, o.name))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

// ---------------------------------------------------------------- the scanner's own tests

const MINI_LIB: &str = r#"
mod runtime;
pub mod api;
mod hidden;
pub use hidden::{exported, Thing};

pub fn direct() {
    runtime::asyncpreempt::in_runtime(|| ());
}

pub fn bypass() {
    runtime::touch();
}

// entry: reads a constant
pub fn justified() -> u32 {
    3
}

pub(crate) fn internal() {
    runtime::touch();
}

#[cfg(test)]
pub fn only_in_tests() {
    runtime::touch();
}
"#;

const MINI_RUNTIME: &str = r#"
pub(crate) mod entry {
    pub(crate) fn call<R>(f: impl FnOnce() -> R) -> R { f() }
    pub(crate) fn call_here<R>(f: impl FnOnce(()) -> R) -> R { f(()) }
}
pub(crate) mod asyncpreempt {
    pub(crate) use super::entry::call as in_runtime;
}
pub(crate) fn touch() {}
pub(crate) fn gated_helper() {
    super::runtime::entry::call(touch)
}
"#;

const MINI_API: &str = r#"
use crate::runtime;

pub fn delegates() {
    runtime::gated_helper()
}

pub fn delegates_to_public() {
    crate::direct()
}

pub fn reaches_bypass() {
    crate::bypass()
}

pub struct Handle { inner: std::sync::Arc<Inner> }
struct Inner;

impl Inner {
    fn work(&self) { runtime::touch() }
    fn gated(&self) { crate::runtime::asyncpreempt::in_runtime(|| runtime::touch()) }
}

impl Handle {
    pub fn method_bypass(&self) { self.inner.work() }
    pub fn method_ok(&self) { self.inner.gated() }
    pub fn method_here(&self) { crate::runtime::entry::call_here(|_| runtime::touch()) }
    /// A getter.
    #[inline]
    pub fn getter(&self) -> u32 {
        // entry: no runtime state
        0
    }
    fn private(&self) { self.inner.work() }
}

impl Drop for Handle {
    fn drop(&mut self) { self.inner.work() }
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { self.inner.work(); Ok(()) }
}
"#;

const MINI_HIDDEN: &str = r#"
pub fn exported() { crate::runtime::touch() }
pub fn not_exported() { crate::runtime::touch() }
pub struct Thing;
impl Iterator for Thing {
    type Item = ();
    fn next(&mut self) -> Option<()> { crate::runtime::touch(); None }
}
pub struct Private;
impl Private {
    pub fn unreachable(&self) { crate::runtime::touch() }
}
"#;

fn mini() -> BTreeMap<&'static str, &'static str> {
    BTreeMap::from([
        ("src/lib.rs", MINI_LIB),
        ("src/runtime.rs", MINI_RUNTIME),
        ("src/api.rs", MINI_API),
        ("src/hidden/mod.rs", MINI_HIDDEN),
    ])
}

#[test]
fn scanner_reports_bypasses_and_only_them() {
    let names: Vec<(String, usize)> = scan_sources(&mini())
        .into_iter()
        .map(|o| (format!("{}: {}", o.file, o.name), o.line))
        .collect();
    let found: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        found,
        [
            "src/api.rs: reaches_bypass",
            "src/api.rs: Handle::method_bypass",
            "src/api.rs: <Handle as Drop>::drop",
            "src/hidden/mod.rs: exported",
            "src/hidden/mod.rs: <Thing as Iterator>::next",
            "src/lib.rs: bypass",
        ]
    );
    // Lines point at the `fn`.
    let bypass = names
        .iter()
        .find(|(n, _)| n == "src/lib.rs: bypass")
        .unwrap();
    assert_eq!(
        MINI_LIB.lines().nth(bypass.1 - 1).unwrap().trim(),
        "pub fn bypass() {"
    );
}

#[test]
fn scanner_accepts_a_gate_added_or_a_reason_given() {
    let fixed_lib = MINI_LIB.replace(
        "pub fn bypass() {\n    runtime::touch();",
        "pub fn bypass() {\n    runtime::asyncpreempt::in_runtime(runtime::touch);",
    );
    let fixed_api = MINI_API
        .replace(
            "pub fn method_bypass(&self) {",
            "// entry: test reason\n    pub fn method_bypass(&self) {",
        )
        .replace(
            "fn drop(&mut self) { self.inner.work() }",
            "fn drop(&mut self) { self.inner.gated() }",
        );
    let mut files = mini();
    files.insert("src/lib.rs", &fixed_lib);
    files.insert("src/api.rs", &fixed_api);
    let names: Vec<String> = scan_sources(&files).into_iter().map(|o| o.name).collect();
    // `reaches_bypass` now delegates to a gated function.
    assert_eq!(names, ["exported", "<Thing as Iterator>::next"]);
}

#[test]
fn an_empty_reason_is_no_reason() {
    let lib = MINI_LIB.replace("// entry: reads a constant", "// entry:");
    let mut files = mini();
    files.insert("src/lib.rs", &lib);
    let names: Vec<String> = scan_sources(&files).into_iter().map(|o| o.name).collect();
    assert!(names.contains(&"justified".to_string()), "{names:?}");
}

#[test]
fn a_reason_above_an_impl_covers_its_methods() {
    let hidden = MINI_HIDDEN.replace(
        "impl Iterator for Thing {",
        "// entry: test reason for the whole impl\nimpl Iterator for Thing {",
    );
    let mut files = mini();
    files.insert("src/hidden/mod.rs", &hidden);
    let names: Vec<String> = scan_sources(&files).into_iter().map(|o| o.name).collect();
    assert!(
        !names.contains(&"<Thing as Iterator>::next".to_string()),
        "{names:?}"
    );
    assert!(names.contains(&"exported".to_string()), "{names:?}");
}
