//! The module-cycle rule: within a crate, no module reaches itself through
//! the paths it names.
//!
//! Each crate's library, binary and `src/bin/*` trees are read from their
//! root file by following `mod` declarations (tests, `#[cfg(test)]`, left
//! out). A file depends on a module when it names it in a `use` or in any
//! path of its code: `crate::`, `super::`, `self::`, or one of its own
//! child modules. A path is followed through modules as deep as they go,
//! and through the `use` items that pass it on, so `use super::Records`
//! depends on `records` when the parent re-exports it from there. A
//! module's use of its own ancestors is not counted: they hold it, and
//! `use super::*` in a child is how Rust shares a parent's items. A cycle
//! is a strongly connected component of more than one file.
//!
//! Paths inside macros are not seen (they are tokens, not syntax).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

use super::{is_test_file, relative};

/// One cycle per strongly connected component of more than one file, in
/// every crate under `root` that `crates` lists: each file of the cycle in
/// order, back to the first.
pub(crate) fn module_cycles(root: &Path, crates: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for krate in crates {
        for tree in crate_roots(&root.join(krate).join("src")) {
            let graph = Graph::read(&tree);
            for (files, cycle) in graph.cycles() {
                let names: Vec<String> = cycle.iter().map(|file| relative(root, file)).collect();
                found.push(format!(
                    "module cycle ({files} files in one circle): {}",
                    names.join(" -> ")
                ));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// The root files of the crates in a `src` directory: `lib.rs`, `main.rs`
/// and each `bin/*.rs`.
fn crate_roots(src: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|name| src.join(name))
        .filter(|path| path.is_file())
        .collect();
    if let Ok(entries) = std::fs::read_dir(src.join("bin")) {
        let mut bins: Vec<PathBuf> = entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|e| e == "rs"))
            .collect();
        bins.sort();
        roots.extend(bins);
    }
    roots
}

/// A module's path from the crate root, `[]` for the root itself.
type ModulePath = Vec<String>;

/// One crate's modules, the file each lives in, and the files each file
/// depends on.
#[derive(Default)]
struct Graph {
    /// Every module (inline ones too) and the file that holds it.
    modules: BTreeMap<ModulePath, PathBuf>,
    /// The module each file is (its file-level module).
    files: BTreeMap<PathBuf, ModulePath>,
    /// Each file's parsed items, kept for the second pass.
    parsed: Vec<(PathBuf, ModulePath, syn::File)>,
    /// File → the files it depends on.
    edges: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
    /// Each module's `use` names: what the name stands for, so a path
    /// through a re-export depends on where the item is, not on the
    /// module that passes it on.
    bindings: BTreeMap<ModulePath, BTreeMap<String, Vec<String>>>,
}

/// How many re-exports a path is followed through.
const MAX_REEXPORTS: usize = 8;

impl Graph {
    /// Reads the tree under `root_file`: first every module, then every
    /// path each file names.
    fn read(root_file: &Path) -> Self {
        let mut graph = Graph::default();
        graph.add_file(root_file, Vec::new(), true);
        let parsed = std::mem::take(&mut graph.parsed);
        let mut named = Vec::new();
        for (file, module, syntax) in &parsed {
            let mut paths = Paths {
                module: module.clone(),
                found: Vec::new(),
                bindings: &mut graph.bindings,
            };
            paths.visit_file(syntax);
            named.push((file, paths.found));
        }
        for (file, found) in named {
            for (from, path) in found {
                if let Some(target) = graph.resolve(&from, &path, 0)
                    && !graph.encloses(&target, file)
                {
                    graph.edges.entry(file.clone()).or_default().insert(target);
                }
            }
        }
        graph
    }

    /// Whether file `outer` is `inner` or one of the modules that hold it:
    /// a module may use what its ancestors define, as they hold it.
    fn encloses(&self, outer: &Path, inner: &Path) -> bool {
        match (self.files.get(outer), self.files.get(inner)) {
            (Some(outer), Some(inner)) => inner.starts_with(outer),
            _ => true,
        }
    }

    /// Records the file `path` as module `module`, and every module it
    /// declares, inline or in files of their own.
    fn add_file(&mut self, path: &Path, module: ModulePath, owns_dir: bool) {
        if self.files.contains_key(path) {
            return;
        }
        let Ok(text) = std::fs::read_to_string(path) else {
            return;
        };
        let Ok(syntax) = syn::parse_file(&text) else {
            return;
        };
        self.modules.insert(module.clone(), path.to_path_buf());
        self.files.insert(path.to_path_buf(), module.clone());
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let children_dir = if owns_dir {
            dir.clone()
        } else {
            dir.join(path.file_stem().unwrap_or_default())
        };
        self.add_items(path, &syntax.items, &module, &dir, &children_dir);
        self.parsed.push((path.to_path_buf(), module, syntax));
    }

    /// The modules `items` declare, inside module `module` of file `file`.
    fn add_items(
        &mut self,
        file: &Path,
        items: &[syn::Item],
        module: &ModulePath,
        file_dir: &Path,
        children_dir: &Path,
    ) {
        for item in items {
            let syn::Item::Mod(declared) = item else {
                continue;
            };
            if is_test_only(&declared.attrs) {
                continue;
            }
            let name = declared.ident.to_string();
            let mut child = module.clone();
            child.push(name.clone());
            if let Some((_, inner)) = &declared.content {
                self.modules.insert(child.clone(), file.to_path_buf());
                let inner_dir = children_dir.join(&name);
                self.add_items(file, inner, &child, file_dir, &inner_dir);
                continue;
            }
            let (path, owns_dir) = match path_attribute(&declared.attrs) {
                Some(explicit) => {
                    let path = file_dir.join(explicit);
                    let owns = path.file_name().is_some_and(|n| n == "mod.rs");
                    (path, owns)
                }
                None => {
                    let flat = children_dir.join(format!("{name}.rs"));
                    if flat.is_file() {
                        (flat, false)
                    } else {
                        (children_dir.join(&name).join("mod.rs"), true)
                    }
                }
            };
            if !is_test_file(&path) {
                self.add_file(&path, child, owns_dir);
            }
        }
    }

    /// The file holding the module that `path`, named inside module
    /// `from`, leads to: as deep as its segments are modules, then through
    /// the `use` that binds its next segment, if any (`use crate::auth;`
    /// then `auth::approval::check`; `super::Records` re-exported from
    /// `records`). A path from outside the crate leads back to `from`'s
    /// own file.
    fn resolve(&self, from: &ModulePath, path: &[String], depth: usize) -> Option<PathBuf> {
        let mut base = from.clone();
        let mut rest = path;
        while let Some((segment, after)) = rest.split_first() {
            match segment.as_str() {
                "crate" => base.clear(),
                "self" => {}
                "super" => {
                    base.pop()?;
                }
                name => {
                    base.push(name.to_owned());
                    if !self.modules.contains_key(&base) {
                        base.pop();
                        break;
                    }
                }
            }
            rest = after;
        }
        let passed_on = rest
            .split_first()
            .and_then(|(name, after)| Some((self.bindings.get(&base)?.get(name)?, after)));
        match passed_on {
            Some((target, after)) if depth < MAX_REEXPORTS => {
                let mut path = target.clone();
                path.extend(after.iter().cloned());
                self.resolve(&base, &path, depth + 1)
            }
            _ => self.modules.get(&base).cloned(),
        }
    }

    /// Each strongly connected component of more than one file, as its
    /// size and one cycle through it (Tarjan's algorithm, then a shortest way back to the
    /// component's first file).
    fn cycles(&self) -> Vec<(usize, Vec<PathBuf>)> {
        let nodes: Vec<&PathBuf> = self.files.keys().collect();
        let mut tarjan = Tarjan::default();
        for node in &nodes {
            if !tarjan.index.contains_key(*node) {
                tarjan.connect(node, &self.edges);
            }
        }
        tarjan
            .components
            .into_iter()
            .filter(|component| component.len() > 1)
            .filter_map(|component| Some((component.len(), self.cycle_in(&component)?)))
            .collect()
    }

    /// A shortest cycle from the component's first file back to it,
    /// staying inside the component.
    fn cycle_in(&self, component: &BTreeSet<PathBuf>) -> Option<Vec<PathBuf>> {
        let start = component.iter().next()?;
        let mut came_from: BTreeMap<&PathBuf, &PathBuf> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(node) = queue.pop_front() {
            for next in self.edges.get(node).into_iter().flatten() {
                if !component.contains(next) {
                    continue;
                }
                if next == start {
                    let mut way_back = Vec::new();
                    let mut at = node;
                    while at != start {
                        way_back.push(at.clone());
                        at = came_from.get(at)?;
                    }
                    way_back.reverse();
                    let mut cycle = vec![start.clone()];
                    cycle.extend(way_back);
                    cycle.push(start.clone());
                    return Some(cycle);
                }
                if !came_from.contains_key(next) {
                    came_from.insert(next, node);
                    queue.push_back(next);
                }
            }
        }
        None
    }
}

/// Tarjan's strongly connected components, recursive (module graphs are
/// shallow).
#[derive(Default)]
struct Tarjan {
    next: usize,
    index: BTreeMap<PathBuf, usize>,
    low: BTreeMap<PathBuf, usize>,
    stack: Vec<PathBuf>,
    on_stack: BTreeSet<PathBuf>,
    components: Vec<BTreeSet<PathBuf>>,
}

impl Tarjan {
    fn connect(&mut self, node: &PathBuf, edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) {
        self.index.insert(node.clone(), self.next);
        self.low.insert(node.clone(), self.next);
        self.next += 1;
        self.stack.push(node.clone());
        self.on_stack.insert(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            if !self.index.contains_key(next) {
                self.connect(next, edges);
                let low = self.low[next].min(self.low[node]);
                self.low.insert(node.clone(), low);
            } else if self.on_stack.contains(next) {
                let low = self.index[next].min(self.low[node]);
                self.low.insert(node.clone(), low);
            }
        }
        if self.low[node] == self.index[node] {
            let mut component = BTreeSet::new();
            while let Some(top) = self.stack.pop() {
                self.on_stack.remove(&top);
                let done = top == *node;
                component.insert(top);
                if done {
                    break;
                }
            }
            self.components.push(component);
        }
    }
}

/// Every path a file names, with the module it is named in, and every
/// name its `use` items bind.
struct Paths<'g> {
    module: ModulePath,
    found: Vec<(ModulePath, Vec<String>)>,
    bindings: &'g mut BTreeMap<ModulePath, BTreeMap<String, Vec<String>>>,
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if is_test_only(&item.attrs) || item.content.is_none() {
            return;
        }
        self.module.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.module.pop();
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if !is_test_only(&item.attrs) {
            syn::visit::visit_item_fn(self, item);
        }
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        if !is_test_only(&item.attrs) {
            syn::visit::visit_item_impl(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        if is_test_only(&item.attrs) {
            return;
        }
        let mut paths = Vec::new();
        flatten(&item.tree, &mut Vec::new(), &mut paths);
        for (name, path) in paths {
            if let Some(name) = name {
                let bound = self.bindings.entry(self.module.clone()).or_default();
                bound.insert(name, path.clone());
            }
            self.found.push((self.module.clone(), path));
        }
    }

    /// `pub(crate)`, `pub(super)`: who may see an item, not what it uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.found.push((self.module.clone(), segments));
        syn::visit::visit_path(self, path);
    }
}

/// Each path a `use` tree names, as its segments (a glob ends at the
/// segment before it), with the name it binds (none for a glob or `_`).
fn flatten(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(Option<String>, Vec<String>)>,
) {
    let named = |ident: &syn::Ident| {
        let mut path = prefix.clone();
        if ident != "self" {
            path.push(ident.to_string());
        }
        path
    };
    match tree {
        syn::UseTree::Path(path) => {
            prefix.push(path.ident.to_string());
            flatten(&path.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(name) => {
            let path = named(&name.ident);
            out.push((path.last().cloned(), path));
        }
        syn::UseTree::Rename(rename) => {
            let bound = (rename.rename != "_").then(|| rename.rename.to_string());
            out.push((bound, named(&rename.ident)));
        }
        syn::UseTree::Glob(_) => out.push((None, prefix.clone())),
        syn::UseTree::Group(group) => {
            for tree in &group.items {
                flatten(tree, prefix, out);
            }
        }
    }
}

/// Whether `attrs` hold `#[cfg(test)]` (alone, not `any(test, …)`).
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}

/// The value of a `#[path = "…"]` attribute.
fn path_attribute(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| {
        let syn::Meta::NameValue(pair) = &attr.meta else {
            return None;
        };
        if !pair.path.is_ident("path") {
            return None;
        }
        let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(value),
            ..
        }) = &pair.value
        else {
            return None;
        };
        Some(value.value())
    })
}
