//! `#[goroutine::main]` and `#[goroutine::test]`: the `goroutine` crate's
//! attribute macros. Use them through `goroutine` (its default `macros`
//! feature re-exports them); this crate is not meant to be depended on
//! directly, as `tokio-macros` is not.
//!
//! # Design
//! Both macros move the function's body, unchanged, into a nested function
//! with the same return type (`fn __goroutine_main() -> R { body }`), and
//! make the outer function call a helper of `goroutine::__private` with
//! that nested function. A nested `fn` rather than a closure keeps every
//! form of body working as written: `return`, `?`, `-> impl Trait`, items
//! declared inside. The helpers run it as the main goroutine with
//! `goroutine::run` and turn its result into something that can cross
//! back to the calling thread (`Send`) inside the goroutine: for `main`,
//! `std::process::Termination::report` (which prints `Error: {e:?}` as a
//! plain `main` does); for a test, the `Debug` text of the error. So the
//! body's result need not be `Send`: `Result<(), Box<dyn Error>>` works.
//!
//! Options are parsed by name (`parse_options`); anything else is a
//! compile error that lists what is accepted. They reach the helpers as a
//! builder, `goroutine::__private::Options::new().max_procs(4)`, so a new
//! option (a flag such as `synctest`) is one more arm of `parse_options`,
//! one more field of `Options` here and one more setter there.
//!
//! Misuse is a compile error pointing at the offending token: an item that
//! is not a function, arguments, generics, `async`, `const`, `unsafe`, an
//! ABI, a second `#[test]`. On an error a `main` is replaced by an empty
//! function of the same name, and a test by nothing, so the one error is
//! all the user sees (no "`main` function not found", no second error about
//! the same signature from the compiler).

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;

/// Runs `main` as the main goroutine (id 1): the runtime starts, the body
/// runs on a goroutine, and the process's exit status follows what the
/// body returns, as for a plain `main`: `()`, or `Result<(), E>` with
/// `E: Debug` (an `Err` prints `Error: {e:?}` and exits with status 1), or
/// anything else that implements `std::process::Termination`. The result
/// need not be `Send`.
///
/// ```ignore
/// #[goroutine::main]
/// fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let (tx, rx) = goroutine::chan(0);
///     goroutine::go(move || tx.send(42).unwrap());
///     println!("{}", rx.recv()?);
///     Ok(())
/// }
/// ```
///
/// # Options
/// - `max_procs = N`: the runtime starts with `N` processors (GOMAXPROCS),
///   whatever the `GOMAXPROCS` environment variable says (1 to 1024).
///
/// The function takes no arguments and is not generic, `async`, `const`
/// or `unsafe`: goroutines are stackful, so a blocking call needs no
/// `.await` (a future is awaited with `goroutine::block_on`).
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(Kind::Main, args.into(), item.into()).into()
}

/// Marks a test whose body runs as a goroutine: `#[test]` plus
/// `goroutine::run`. The test may return `()` or `Result<(), E>` with
/// `E: Debug` (an `Err` fails it, showing `Error: {e:?}`); the result need
/// not be `Send`. A panic in the body fails the test (`#[should_panic]`
/// works), and so does a panic of a goroutine the body joins.
///
/// ```ignore
/// #[goroutine::test]
/// fn pingpong() {
///     let (tx, rx) = goroutine::chan(0);
///     goroutine::go(move || tx.send(1).unwrap());
///     assert_eq!(rx.recv().unwrap(), 1);
/// }
/// ```
///
/// # Options
/// - `max_procs = N`: the test runs at GOMAXPROCS `N` (1 to 1024). A
///   process has one runtime, shared by all its tests; while such a test
///   runs, no other `#[goroutine::test]` of the process runs, and the
///   previous GOMAXPROCS is restored after it.
/// - `synctest`: the body runs as the root goroutine of a synctest bubble
///   (`goroutine::synctest::test`): a fake clock that moves only when every
///   goroutine of the test is durably blocked, and a deadlock among them
///   fails the test at once with their dump.
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(Kind::Test, args.into(), item.into()).into()
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Main,
    Test,
}

impl Kind {
    fn attr(self) -> &'static str {
        match self {
            Kind::Main => "#[goroutine::main]",
            Kind::Test => "#[goroutine::test]",
        }
    }

    /// The options this macro takes, as the error for an unknown one lists
    /// them.
    fn options(self) -> &'static str {
        match self {
            Kind::Main => "`max_procs = N`",
            Kind::Test => "`max_procs = N`, `synctest`",
        }
    }
}

/// The parsed options. A new option is one more field here and one more arm
/// in [`parse_options`].
#[derive(Default)]
struct Options {
    /// GOMAXPROCS for the body.
    max_procs: Option<usize>,
    /// Run the body as the root of a synctest bubble (tests only).
    synctest: bool,
}

/// The most Ps the runtime has (`set_max_procs` caps at it).
const MAX_PROCS: usize = 1024;

fn parse_options(kind: Kind, args: TokenStream2) -> syn::Result<Options> {
    let mut opts = Options::default();
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("max_procs") {
            if opts.max_procs.is_some() {
                return Err(meta.error("`max_procs` is given twice"));
            }
            if meta.input.is_empty() || meta.input.peek(syn::Token![,]) {
                return Err(meta.error("`max_procs` needs a value: `max_procs = 4`"));
            }
            let value = meta.value()?;
            let expr: syn::Expr = value.parse()?;
            let n = match &expr {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Int(lit),
                    ..
                }) => lit.base10_parse::<usize>().ok(),
                _ => None,
            };
            match n {
                Some(n) if (1..=MAX_PROCS).contains(&n) => {
                    opts.max_procs = Some(n);
                    Ok(())
                }
                Some(_) => Err(syn::Error::new(
                    expr.span(),
                    format!("`max_procs` must be between 1 and {MAX_PROCS}"),
                )),
                None => Err(syn::Error::new(
                    expr.span(),
                    "`max_procs` takes an integer literal: `max_procs = 4`",
                )),
            }
        } else if meta.path.is_ident("synctest") && kind == Kind::Test {
            if opts.synctest {
                return Err(meta.error("`synctest` is given twice"));
            }
            if !meta.input.is_empty() && !meta.input.peek(syn::Token![,]) {
                return Err(meta.error("`synctest` takes no value: `#[goroutine::test(synctest)]`"));
            }
            opts.synctest = true;
            Ok(())
        } else {
            let name = meta.path.to_token_stream().to_string().replace(' ', "");
            Err(meta.error(format!(
                "unknown option `{name}`: {} takes {}",
                kind.attr(),
                kind.options()
            )))
        }
    });
    syn::parse::Parser::parse2(parser, args)?;
    Ok(opts)
}

fn expand(kind: Kind, args: TokenStream2, item: TokenStream2) -> TokenStream2 {
    let opts = parse_options(kind, args);
    let item: syn::Item = match syn::parse2(item.clone()) {
        Ok(item) => item,
        // Not even an item: the compiler's own error on `item` says why.
        Err(_) => return item,
    };
    let f = match item {
        syn::Item::Fn(f) => f,
        other => {
            let e = syn::Error::new(
                item_span(&other),
                format!(
                    "{} applies to a function: `fn {}() {{ ... }}`",
                    kind.attr(),
                    if kind == Kind::Main {
                        "main"
                    } else {
                        "my_test"
                    }
                ),
            );
            return error_with(e, other.to_token_stream());
        }
    };
    let checked = check_fn(kind, &f).and(opts);
    match checked {
        Ok(opts) => match kind {
            Kind::Main => expand_main(f, opts),
            Kind::Test => expand_test(f, opts),
        },
        Err(e) => {
            // In place of the function, for this error to be the only one:
            // for `main`, an empty one of the same name (no "`main` function
            // not found", no second error about the signature); for a test,
            // nothing (it must not run unexpanded).
            let stub = match kind {
                Kind::Main => {
                    let (vis, ident) = (&f.vis, &f.sig.ident);
                    quote!(#[allow(dead_code)] #vis fn #ident() {})
                }
                Kind::Test => quote!(),
            };
            error_with(e, stub)
        }
    }
}

/// The span that names an item that is not a function (its keyword).
fn item_span(item: &syn::Item) -> Span {
    match item {
        syn::Item::Struct(s) => s.struct_token.span,
        syn::Item::Enum(e) => e.enum_token.span,
        syn::Item::Mod(m) => m.mod_token.span,
        syn::Item::Impl(i) => i.impl_token.span,
        syn::Item::Trait(t) => t.trait_token.span,
        syn::Item::Const(c) => c.const_token.span,
        syn::Item::Static(s) => s.static_token.span,
        syn::Item::Type(t) => t.type_token.span,
        syn::Item::Use(u) => u.use_token.span,
        other => other.span(),
    }
}

fn error_with(e: syn::Error, item: TokenStream2) -> TokenStream2 {
    let e = e.to_compile_error();
    quote!(#e #item)
}

fn check_fn(kind: Kind, f: &syn::ItemFn) -> syn::Result<()> {
    let what = kind.attr();
    let sig = &f.sig;
    let mut errors: Vec<syn::Error> = Vec::new();
    if let Some(t) = &sig.asyncness {
        errors.push(syn::Error::new(
            t.span,
            format!(
                "{what} takes a plain `fn`, not an `async fn`: the body runs on a goroutine, \
                 where blocking calls park without `.await`; remove `async` (await a future \
                 inside with `goroutine::block_on`)"
            ),
        ));
    }
    if let Some(t) = &sig.constness {
        errors.push(syn::Error::new(
            t.span,
            format!("{what} cannot be applied to a `const fn`"),
        ));
    }
    if let Some(t) = &sig.unsafety {
        errors.push(syn::Error::new(
            t.span,
            format!("{what} cannot be applied to an `unsafe fn`"),
        ));
    }
    if let Some(abi) = &sig.abi {
        errors.push(syn::Error::new(
            abi.extern_token.span,
            format!("{what} cannot be applied to an `extern` function"),
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        let tokens = if sig.generics.params.is_empty() {
            sig.generics.where_clause.to_token_stream()
        } else {
            sig.generics.to_token_stream()
        };
        errors.push(syn::Error::new_spanned(
            tokens,
            match kind {
                Kind::Main => format!("{what}: `main` cannot be generic"),
                Kind::Test => format!("{what}: a test function cannot be generic"),
            },
        ));
    }
    if !sig.inputs.is_empty() || sig.variadic.is_some() {
        let tokens = if sig.inputs.is_empty() {
            sig.variadic.to_token_stream()
        } else {
            sig.inputs.to_token_stream()
        };
        errors.push(syn::Error::new_spanned(
            tokens,
            match kind {
                Kind::Main => format!("{what}: `main` takes no arguments"),
                Kind::Test => format!("{what}: a test function takes no arguments"),
            },
        ));
    }
    if kind == Kind::Test {
        for attr in &f.attrs {
            if attr.path().is_ident("test") {
                errors.push(syn::Error::new_spanned(
                    attr,
                    "#[goroutine::test] already makes this a test: remove this `#[test]`",
                ));
            }
        }
    }
    let mut errors = errors.into_iter();
    match errors.next() {
        None => Ok(()),
        Some(mut first) => {
            for e in errors {
                first.combine(e);
            }
            Err(first)
        }
    }
}

/// The options as `goroutine::__private::Options` builds them.
fn options_tokens(opts: &Options) -> TokenStream2 {
    let mut t = quote!(::goroutine::__private::Options::new());
    if let Some(n) = opts.max_procs {
        t.extend(quote!(.max_procs(#n)));
    }
    if opts.synctest {
        t.extend(quote!(.synctest()));
    }
    t
}

/// The span errors about the return type point at: the type, or the name
/// of a function without one.
fn output_span(sig: &syn::Signature) -> Span {
    match &sig.output {
        syn::ReturnType::Default => sig.ident.span(),
        syn::ReturnType::Type(_, ty) => ty.span(),
    }
}

fn expand_main(f: syn::ItemFn, opts: Options) -> TokenStream2 {
    let syn::ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = f;
    let ident = &sig.ident;
    let output = &sig.output;
    let options = options_tokens(&opts);
    let call = quote_spanned! {output_span(&sig)=>
        ::goroutine::__private::main(#options, __goroutine_main)
    };
    quote! {
        #(#attrs)*
        #vis fn #ident() -> ::std::process::ExitCode {
            fn __goroutine_main() #output #block
            #call
        }
    }
}

fn expand_test(f: syn::ItemFn, opts: Options) -> TokenStream2 {
    let syn::ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = f;
    let ident = &sig.ident;
    let output = &sig.output;
    let options = options_tokens(&opts);
    // A unit test stays a unit test (`#[should_panic]` requires it); any
    // other return type becomes what `TestReturn` makes of it, on the test
    // thread.
    let outer = match output {
        syn::ReturnType::Type(_, ty) if !is_unit(ty) => quote_spanned! {ty.span()=>
            -> <#ty as ::goroutine::__private::TestReturn>::Outer
        },
        _ => quote!(),
    };
    let call = quote_spanned! {output_span(&sig)=>
        ::goroutine::__private::test(#options, __goroutine_test)
    };
    quote! {
        #[::core::prelude::v1::test]
        #(#attrs)*
        #vis fn #ident() #outer {
            fn __goroutine_test() #output #block
            #call
        }
    }
}

fn is_unit(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Tuple(t) => t.elems.is_empty(),
        syn::Type::Paren(p) => is_unit(&p.elem),
        _ => false,
    }
}
