//! In-process tests of the HTTPS server.
