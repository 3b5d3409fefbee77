//! Errors starting a [`TestApiServer`](crate::TestApiServer).

use std::net::SocketAddr;
use std::path::PathBuf;

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why binding failed.
        #[source]
        source: std::io::Error,
    },
    /// The kubeconfig file could not be written.
    #[error("cannot write the kubeconfig {path}")]
    Kubeconfig {
        /// Where it was to be written (empty for a temporary file).
        path: PathBuf,
        /// Why writing failed.
        #[source]
        source: std::io::Error,
    },
    /// The server's URL did not make a client URL.
    #[error("{url} is not a valid URL")]
    Url {
        /// The URL.
        url: String,
        /// Why it is invalid.
        #[source]
        source: http::uri::InvalidUri,
    },
    /// The kube client for the server could not be built.
    #[error("cannot build a kube client for {url}")]
    Client {
        /// The server's URL.
        url: String,
        /// Why the client failed.
        #[source]
        source: kube::Error,
    },
    /// The token file (`--token-auth-file`) could not be read.
    #[error("cannot read the token file {path}")]
    TokenFileRead {
        /// The file.
        path: PathBuf,
        /// Why reading failed.
        #[source]
        source: std::io::Error,
    },
    /// A record of the token file is malformed. The message names the
    /// line, never the token.
    #[error("token file {path}, line {line}: {reason}")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The client CA file (`--client-ca-file`) could not be read.
    #[error("cannot read the client CA file {path}")]
    ClientCaFile {
        /// The file.
        path: PathBuf,
        /// Why reading failed.
        #[source]
        source: std::io::Error,
    },
    /// The system's random source, which tokens are drawn from, failed.
    #[error("cannot read random bytes for a token")]
    Random(#[source] std::io::Error),
    /// A seeded object was refused.
    #[error("cannot seed {object}: {message}")]
    Seed {
        /// The object, `kind/name`.
        object: String,
        /// The API error it got.
        message: String,
    },
}
