//! The image's only layer: the static binary and the few files it needs at
//! run time, with no base distribution under them.

use std::io::Write;

use anyhow::Context;
use flate2::{Compression, GzBuilder};

use super::tarball::{self, Entry, Tree};
use crate::digest::sha256_hex;

/// The non-root user and group the image runs as (distroless' `nonroot`).
pub(crate) const USER_ID: u32 = 65532;

/// Where the CA bundle sits in the image: Debian's path, which rustls' native
/// roots and `SSL_CERT_FILE` both find.
pub(crate) const CA_BUNDLE: &str = "etc/ssl/certs/ca-certificates.crt";

/// What goes into the layer.
#[derive(Debug)]
pub(crate) struct Contents<'a> {
    /// The binary's file name, installed as `/bin/<name>`.
    pub(crate) binary_name: &'a str,
    pub(crate) binary: &'a [u8],
    /// PEM certificates for TLS to cloud APIs.
    pub(crate) ca_bundle: &'a [u8],
}

/// A built layer.
#[derive(Debug)]
pub(crate) struct Layer {
    /// The gzip-compressed tar: the blob.
    pub(crate) compressed: Vec<u8>,
    /// sha256 of the uncompressed tar: the config's `diff_id`.
    pub(crate) diff_id: String,
}

/// The root filesystem's files.
pub(crate) fn tree(contents: &Contents<'_>) -> Tree {
    let passwd = format!(
        "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{USER_ID}:{USER_ID}:nonroot:/nonexistent:/sbin/nologin\n"
    );
    let group = format!("root:x:0:\nnonroot:x:{USER_ID}:\n");
    let mut tree = Tree::new();
    let file = |mode, data: &[u8]| Entry::File {
        mode,
        data: data.to_vec(),
    };
    tarball::insert(
        &mut tree,
        &format!("bin/{}", contents.binary_name),
        file(0o755, contents.binary),
    );
    tarball::insert(&mut tree, CA_BUNDLE, file(0o644, contents.ca_bundle));
    tarball::insert(&mut tree, "etc/passwd", file(0o644, passwd.as_bytes()));
    tarball::insert(&mut tree, "etc/group", file(0o644, group.as_bytes()));
    // World-writable and sticky, like any /tmp: the pod mounts an emptyDir
    // here under a read-only root, but a plain `docker run` needs it too.
    tarball::insert(&mut tree, "tmp/", Entry::Dir { mode: 0o1777 });
    tree
}

/// Archives and compresses `contents`. gzip with a zero mtime, no file name
/// and a fixed OS byte gives the same bytes on every machine.
pub(crate) fn build(contents: &Contents<'_>) -> anyhow::Result<Layer> {
    let tar = tarball::archive(&tree(contents))?;
    let diff_id = format!("sha256:{}", sha256_hex(&tar));
    let mut encoder = GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(Vec::new(), Compression::best());
    encoder.write_all(&tar).context("compressing the layer")?;
    let compressed = encoder.finish().context("compressing the layer")?;
    Ok(Layer {
        compressed,
        diff_id,
    })
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn contents() -> Contents<'static> {
        Contents {
            binary_name: "fake-cloud-controller-manager",
            binary: b"\x7fELF",
            ca_bundle: b"-----BEGIN CERTIFICATE-----\n",
        }
    }

    #[test]
    fn the_layer_holds_the_binary_certificates_users_and_tmp() {
        let paths: Vec<String> = tree(&contents()).into_keys().collect();
        assert_eq!(
            paths,
            [
                "bin/",
                "bin/fake-cloud-controller-manager",
                "etc/",
                "etc/group",
                "etc/passwd",
                "etc/ssl/",
                "etc/ssl/certs/",
                "etc/ssl/certs/ca-certificates.crt",
                "tmp/"
            ]
        );
        let Some(Entry::File { data, .. }) = tree(&contents()).remove("etc/passwd") else {
            panic!("no /etc/passwd")
        };
        assert!(
            String::from_utf8(data)
                .unwrap()
                .contains("nonroot:x:65532:65532:")
        );
    }

    #[test]
    fn the_diff_id_is_the_digest_of_the_uncompressed_tar() {
        let layer = build(&contents()).unwrap();
        let mut tar = Vec::new();
        flate2::read::GzDecoder::new(layer.compressed.as_slice())
            .read_to_end(&mut tar)
            .unwrap();
        assert_eq!(layer.diff_id, format!("sha256:{}", sha256_hex(&tar)));
        assert_eq!(
            build(&contents()).unwrap().compressed,
            layer.compressed,
            "two builds differ"
        );
    }
}
