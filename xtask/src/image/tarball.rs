//! Reproducible tar archives: entries sorted by path, owners and times
//! zeroed, so the same files always give the same bytes.

use std::collections::BTreeMap;

use anyhow::Context;

/// What one path in an archive holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry {
    /// A directory with this mode.
    Dir { mode: u32 },
    /// A regular file with this mode and content.
    File { mode: u32, data: Vec<u8> },
}

/// Files by path, relative and without a leading `/`; directories end in `/`.
/// A sorted map: the archive's order is the paths' order, whatever order the
/// caller added them in.
pub(crate) type Tree = BTreeMap<String, Entry>;

/// The ustar archive of `tree`.
pub(crate) fn archive(tree: &Tree) -> anyhow::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, entry) in tree {
        let mut header = tar::Header::new_ustar();
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(0);
        header.set_username("").context("tar user name")?;
        header.set_groupname("").context("tar group name")?;
        let (mode, data): (u32, &[u8]) = match entry {
            Entry::Dir { mode } => {
                header.set_entry_type(tar::EntryType::Directory);
                (*mode, &[])
            }
            Entry::File { mode, data } => {
                header.set_entry_type(tar::EntryType::Regular);
                (*mode, data)
            }
        };
        header.set_mode(mode);
        header.set_size(data.len() as u64);
        builder
            .append_data(&mut header, path, data)
            .with_context(|| format!("adding {path} to a tar archive"))?;
    }
    builder.into_inner().context("finishing a tar archive")
}

/// Adds `path` and every parent directory missing from `tree` (mode 0755).
pub(crate) fn insert(tree: &mut Tree, path: &str, entry: Entry) {
    let trimmed = path.trim_end_matches('/');
    for (end, _) in trimmed.match_indices('/') {
        tree.entry(format!("{}/", &trimmed[..end]))
            .or_insert(Entry::Dir { mode: 0o755 });
    }
    tree.insert(path.to_owned(), entry);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(data: &str) -> Entry {
        Entry::File {
            mode: 0o644,
            data: data.as_bytes().to_vec(),
        }
    }

    #[test]
    fn parents_are_added_and_entries_come_out_sorted() {
        let mut tree = Tree::new();
        insert(&mut tree, "etc/ssl/certs/ca.crt", file("ca"));
        insert(&mut tree, "bin/ccm", file("elf"));
        insert(&mut tree, "tmp/", Entry::Dir { mode: 0o1777 });
        let bytes = archive(&tree).unwrap();
        let mut reader = tar::Archive::new(bytes.as_slice());
        let entries: Vec<(String, u64, u64, u32)> = reader
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                (
                    e.path().unwrap().display().to_string(),
                    h.uid().unwrap(),
                    h.mtime().unwrap(),
                    h.mode().unwrap(),
                )
            })
            .collect();
        let paths: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(
            paths,
            [
                "bin/",
                "bin/ccm",
                "etc/",
                "etc/ssl/",
                "etc/ssl/certs/",
                "etc/ssl/certs/ca.crt",
                "tmp/"
            ]
        );
        assert!(
            entries.iter().all(|e| e.1 == 0 && e.2 == 0),
            "owners and times are zeroed: {entries:?}"
        );
        assert_eq!(entries.last().map(|e| e.3), Some(0o1777));
    }

    #[test]
    fn the_same_tree_built_in_another_order_gives_the_same_bytes() {
        let mut one = Tree::new();
        insert(&mut one, "a/b", file("1"));
        insert(&mut one, "c", file("2"));
        let mut two = Tree::new();
        insert(&mut two, "c", file("2"));
        insert(&mut two, "a/b", file("1"));
        assert_eq!(archive(&one).unwrap(), archive(&two).unwrap());
    }
}
