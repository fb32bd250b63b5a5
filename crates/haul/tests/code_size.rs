//! Code-size rules for the workspace's non-test source (`crates/*/src/**.rs`, `bench/src/**.rs`):
//!
//! - no source file over [`MAX_FILE_LINES`] lines (every line counts);
//! - no function — free fn, method, associated fn, trait default method, nested fn — over
//!   [`MAX_FN_LINES`] lines, measured from its first non-doc attribute (or its signature) to its
//!   closing brace. Doc comments above a function don't count against it.
//!
//! Test code is exempt: items under a test-only `#[cfg(...)]` (`test`, `all(test, ..)`),
//! `#[test]` fns, and test-module files — any `tests.rs` or file under a `tests/` directory, plus
//! whatever file a test-only `mod x;` declaration points at (e.g. `#[path = "store_tests.rs"]`).
//!
//! On failure every offender is listed, sorted, as `path:line fn_name N lines` or `path N lines`.

use std::fs;
use std::path::{Path, PathBuf};

use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{Attribute, Expr, ImplItem, Item, Lit, Meta, Token, TraitItem, Type, Visibility};

const MAX_FILE_LINES: usize = 600;
const MAX_FN_LINES: usize = 100;

#[test]
fn source_files_and_functions_stay_small() {
    let root = workspace_root();
    let mut files = Vec::new();
    for src in source_roots(&root) {
        walk(&src, &mut files);
    }
    assert!(
        files.iter().any(|f| f.ends_with("crates/haul/src/main.rs")),
        "found no crates/haul/src/main.rs under {}: is the workspace root right?",
        root.display()
    );

    let mut long_files = Vec::new();
    let mut long_fns = Vec::new();
    // Files (and module directories) that test-only `mod x;` declarations point at.
    let mut test_mods = Vec::new();
    let mut fns_checked = 0;
    for path in &files {
        let rel = relative(&root, path);
        let text =
            fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let lines = text.lines().count();
        if lines > MAX_FILE_LINES {
            long_files.push((path.clone(), format!("{rel} {lines} lines")));
        }
        let report = check_source(path, &text);
        fns_checked += report.fns_checked;
        test_mods.extend(report.test_mods);
        for (line, name, len) in report.long_fns {
            long_fns.push((
                path.clone(),
                line,
                format!("{rel}:{line} {name} {len} lines"),
            ));
        }
    }
    assert!(fns_checked > 0, "checked no functions at all");

    let is_test_mod = |p: &Path| test_mods.iter().any(|t| p == t || p.starts_with(t));
    long_files.retain(|(p, _)| !is_test_mod(p));
    long_fns.retain(|(p, _, _)| !is_test_mod(p));
    long_files.sort();
    long_fns.sort();

    let mut msg = String::new();
    if !long_files.is_empty() {
        msg += &format!("source files over {MAX_FILE_LINES} lines:\n");
        for (_, line) in &long_files {
            msg += &format!("  {line}\n");
        }
    }
    if !long_fns.is_empty() {
        msg += &format!("functions over {MAX_FN_LINES} lines (outside test code):\n");
        for (_, _, line) in &long_fns {
            msg += &format!("  {line}\n");
        }
    }
    assert!(
        msg.is_empty(),
        "code-size rules broken; split these:\n{msg}"
    );
}

/// The checker itself: what it measures, and what it treats as test code.
#[test]
fn checker_measures_functions_and_skips_test_code() {
    let body = |n: usize| "    let _x = 1;\n".repeat(n);
    // 100 body lines + signature + closing brace = 102 lines.
    let long = body(100);
    // 98 body lines + 2 = exactly MAX_FN_LINES.
    let ok = body(MAX_FN_LINES - 2);
    let src = format!(
        "/// Docs don't count.\n///\n///\nfn at_limit() {{\n{ok}}}\n\
         #[inline]\nfn too_long() {{\n{long}}}\n\
         struct S;\nimpl S {{\n    pub fn method() {{\n{long}    }}\n}}\n\
         trait T {{\n    fn provided() {{\n{long}    }}\n    fn required();\n}}\n\
         fn outer() {{\n    fn inner() {{\n{long}    }}\n}}\n\
         #[cfg(test)]\nmod tests {{\n    fn helper() {{\n{long}    }}\n}}\n\
         #[test]\nfn a_test() {{\n{long}}}\n\
         #[cfg(all(test, unix))]\nfn test_only() {{\n{long}}}\n\
         #[cfg(not(test))]\nfn not_test() {{\n{long}}}\n\
         #[cfg(test)]\n#[path = \"x_tests.rs\"]\nmod x_tests;\n\
         #[cfg(test)]\nmod more_tests;\n"
    );
    let report = check_source(Path::new("/ws/src/m.rs"), &src);
    let names: Vec<&str> = report.long_fns.iter().map(|(_, n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "too_long",
            "S::method",
            "T::provided",
            "outer",
            "outer::inner",
            "not_test"
        ]
    );
    let (line, _, len) = &report.long_fns[0];
    assert_eq!(
        (*line, *len),
        (104, 103),
        "too_long starts at its #[inline]"
    );
    assert_eq!(
        report.test_mods,
        [
            PathBuf::from("/ws/src/x_tests.rs"),
            PathBuf::from("/ws/src/x_tests"),
            PathBuf::from("/ws/src/m/more_tests.rs"),
            PathBuf::from("/ws/src/m/more_tests"),
        ]
    );
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("crates/haul sits two levels below the workspace root")
        .to_path_buf()
}

/// `bench/src` and every `crates/*/src`.
fn source_roots(root: &Path) -> Vec<PathBuf> {
    let mut roots = vec![root.join("bench/src")];
    let crates = root.join("crates");
    for entry in fs::read_dir(&crates).unwrap_or_else(|e| panic!("read {}: {e}", crates.display()))
    {
        let src = entry.expect("crates/ entry").path().join("src");
        if src.is_dir() {
            roots.push(src);
        }
    }
    roots.sort();
    roots
}

/// Every `*.rs` under `dir`, minus test-module files (`tests.rs`, anything under `tests/`).
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            if name != "tests" && name != "target" {
                walk(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && name != "build.rs" {
            out.push(path);
        }
    }
}

fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

#[derive(Default)]
struct Report {
    /// `(start line, name, length in lines)` of each function over [`MAX_FN_LINES`].
    long_fns: Vec<(usize, String, usize)>,
    /// Files and directories that this file's test-only `mod x;` declarations point at.
    test_mods: Vec<PathBuf>,
    fns_checked: usize,
}

fn check_source(path: &Path, text: &str) -> Report {
    let file = syn::parse_file(text).unwrap_or_else(|e| {
        let at = e.span().start();
        panic!(
            "parse {}:{}:{}: {e}",
            path.display(),
            at.line,
            at.column + 1
        )
    });
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let in_bin = path.parent().is_some_and(|p| p.ends_with("src/bin"));
    let dir = path.parent().unwrap_or(Path::new("")).to_path_buf();
    // Where `mod x;` looks for `x.rs`: next to a crate root or `mod.rs`, else in `<stem>/`.
    let mod_dir = if matches!(name, "lib.rs" | "main.rs" | "mod.rs") || in_bin {
        dir.clone()
    } else {
        dir.join(path.file_stem().unwrap_or_default())
    };
    let mut visitor = FnSizes {
        file_dir: dir,
        mod_dirs: vec![mod_dir],
        scope: Vec::new(),
        report: Report::default(),
    };
    visitor.visit_file(&file);
    visitor.report
}

struct FnSizes {
    /// Directory of the file itself (`#[path]` on a top-level `mod x;` is relative to it).
    file_dir: PathBuf,
    /// Directory of child module files, one entry per enclosing inline `mod`.
    mod_dirs: Vec<PathBuf>,
    /// Enclosing impl types, traits and fns, for naming.
    scope: Vec<String>,
    report: Report,
}

impl FnSizes {
    /// Measures one function from its first non-doc attribute (or `vis`/signature) to `end`.
    fn measure(&mut self, name: &str, attrs: &[Attribute], head: &[usize], end: usize) {
        let start = attrs
            .iter()
            .filter(|a| !a.path().is_ident("doc"))
            .map(|a| a.pound_token.span.start().line)
            .chain(head.iter().copied())
            .min()
            .expect("a function has a signature");
        let full = self
            .scope
            .iter()
            .map(String::as_str)
            .chain([name])
            .collect::<Vec<_>>();
        let full = full.join("::");
        self.report.fns_checked += 1;
        let len = end + 1 - start;
        if len > MAX_FN_LINES {
            self.report.long_fns.push((start, full, len));
        }
    }

    /// Records the file(s) a test-only `mod x;` declaration points at.
    fn test_mod_decl(&mut self, m: &syn::ItemMod) {
        let mod_dir = self.mod_dirs.last().expect("file-level module dir").clone();
        if let Some(p) = path_attr(&m.attrs) {
            let base = if self.mod_dirs.len() == 1 {
                &self.file_dir
            } else {
                &mod_dir
            };
            let file = base.join(p);
            let children = file.with_extension("");
            self.report.test_mods.push(file);
            self.report.test_mods.push(children);
        } else {
            let name = m.ident.to_string();
            self.report
                .test_mods
                .push(mod_dir.join(format!("{name}.rs")));
            // Covers `x/mod.rs` and `x.rs`'s own submodules.
            self.report.test_mods.push(mod_dir.join(name));
        }
    }
}

impl<'ast> Visit<'ast> for FnSizes {
    fn visit_item(&mut self, item: &'ast Item) {
        if is_test_code(item_attrs(item)) {
            if let Item::Mod(m) = item {
                if m.content.is_none() {
                    self.test_mod_decl(m);
                }
            }
            return;
        }
        visit::visit_item(self, item);
    }

    fn visit_impl_item(&mut self, item: &'ast ImplItem) {
        let attrs: &[Attribute] = match item {
            ImplItem::Const(i) => &i.attrs,
            ImplItem::Fn(i) => &i.attrs,
            ImplItem::Type(i) => &i.attrs,
            ImplItem::Macro(i) => &i.attrs,
            _ => &[],
        };
        if !is_test_code(attrs) {
            visit::visit_impl_item(self, item);
        }
    }

    fn visit_trait_item(&mut self, item: &'ast TraitItem) {
        let attrs: &[Attribute] = match item {
            TraitItem::Const(i) => &i.attrs,
            TraitItem::Fn(i) => &i.attrs,
            TraitItem::Type(i) => &i.attrs,
            TraitItem::Macro(i) => &i.attrs,
            _ => &[],
        };
        if !is_test_code(attrs) {
            visit::visit_trait_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            let dir = self
                .mod_dirs
                .last()
                .expect("file-level module dir")
                .join(m.ident.to_string());
            self.mod_dirs.push(dir);
            visit::visit_item_mod(self, m);
            self.mod_dirs.pop();
        }
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        self.scope.push(type_name(&i.self_ty));
        visit::visit_item_impl(self, i);
        self.scope.pop();
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        self.scope.push(t.ident.to_string());
        visit::visit_item_trait(self, t);
        self.scope.pop();
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        let name = f.sig.ident.to_string();
        let mut head = vec![f.sig.span().start().line];
        if !matches!(f.vis, Visibility::Inherited) {
            head.push(f.vis.span().start().line);
        }
        let end = f.block.brace_token.span.close().end().line;
        self.measure(&name, &f.attrs, &head, end);
        self.scope.push(name);
        visit::visit_item_fn(self, f);
        self.scope.pop();
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        let name = f.sig.ident.to_string();
        let mut head = vec![f.sig.span().start().line];
        if !matches!(f.vis, Visibility::Inherited) {
            head.push(f.vis.span().start().line);
        }
        if let Some(d) = &f.defaultness {
            head.push(d.span.start().line);
        }
        let end = f.block.brace_token.span.close().end().line;
        self.measure(&name, &f.attrs, &head, end);
        self.scope.push(name);
        visit::visit_impl_item_fn(self, f);
        self.scope.pop();
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        let name = f.sig.ident.to_string();
        if let Some(block) = &f.default {
            let head = [f.sig.span().start().line];
            let end = block.brace_token.span.close().end().line;
            self.measure(&name, &f.attrs, &head, end);
        }
        self.scope.push(name);
        visit::visit_trait_item_fn(self, f);
        self.scope.pop();
    }
}

fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// `#[test]` (or `#[tokio::test]` and the like), or a `#[cfg(..)]` that only holds in tests.
fn is_test_code(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let path = attr.path();
        if path.is_ident("cfg") {
            attr.parse_args::<Meta>().is_ok_and(|m| cfg_test_only(&m))
        } else {
            path.segments.last().is_some_and(|s| s.ident == "test")
        }
    })
}

/// Whether a `cfg` predicate can only hold when compiling tests.
fn cfg_test_only(meta: &Meta) -> bool {
    match meta {
        Meta::Path(p) => p.is_ident("test"),
        Meta::List(list) => {
            let Ok(args) = list.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
            else {
                return false;
            };
            if list.path.is_ident("all") {
                args.iter().any(cfg_test_only)
            } else if list.path.is_ident("any") {
                !args.is_empty() && args.iter().all(cfg_test_only)
            } else {
                false
            }
        }
        Meta::NameValue(_) => false,
    }
}

/// The string in `#[path = "..."]`, if any.
fn path_attr(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| match &attr.meta {
        Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// `Foo` for `impl Foo`, `impl<T> Foo<T>` and `impl Trait for Foo`.
fn type_name(ty: &Type) -> String {
    match ty {
        Type::Path(p) => p
            .path
            .segments
            .last()
            .map_or_else(String::new, |s| s.ident.to_string()),
        Type::Reference(r) => type_name(&r.elem),
        _ => "impl".to_owned(),
    }
}
