//! Where the CCM's heap goes: its `/debug/pprof/heap` (jemalloc's sampling
//! profiler, as a gzipped pprof protobuf with function names), read back
//! and summed by allocation site.
//!
//! A site is the innermost frame of an allocation's stack that is not the
//! allocator's or the standard library's plumbing: the code that decided to
//! keep the memory. The values are jemalloc's estimates of live bytes (each
//! sample weighted by its sampling probability).

use std::collections::HashMap;
use std::io::Read;
use std::net::SocketAddr;

use anyhow::{Context, ensure};
use prost::Message;

use super::measurements::Usage;
use super::scenarios::{Figure, Scenario};
use crate::http;

/// The parts of pprof's `Profile` message (profile.proto) read here.
#[derive(Clone, PartialEq, Message)]
struct Profile {
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Sample {
    /// Innermost frame first.
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    /// Innermost (inlined) function first.
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
}

#[derive(Clone, PartialEq, Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    /// An index into the string table.
    #[prost(int64, tag = "2")]
    name: i64,
}

/// How many allocation sites a heap note names.
const NOTED_SITES: usize = 8;

/// A heap profile taken `when` ("once every node was initialized"), as a
/// figure and a note naming the largest allocation sites.
pub(crate) fn note(scenario: &mut Scenario, heap: &HeapProfile, usage: Usage, when: &str) {
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    scenario.figure(Figure::new(
        format!("CCM live heap {when} (jemalloc's estimate)"),
        (mib(heap.total) * 10.0).round() / 10.0,
        "MiB",
    ));
    let sites = heap
        .top(NOTED_SITES)
        .iter()
        .map(|(site, bytes)| format!("`{site}` {:.1} MiB", mib(*bytes)))
        .collect::<Vec<_>>()
        .join("; ");
    scenario.note(format!(
        "Heap {when}: {:.1} MiB live, resident {:.1} MiB. By allocation site: {sites}.",
        mib(heap.total),
        usage.rss_kib as f64 / 1024.0
    ));
}

/// Live heap bytes by allocation site, largest first.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HeapProfile {
    /// Every sampled live byte.
    pub(crate) total: u64,
    /// `(site, bytes)`, largest first.
    pub(crate) sites: Vec<(String, u64)>,
}

/// Frames that only carry an allocation along: the allocator and its
/// profiler, the standard library, containers, (de)serialization, clones
/// of API types, and the async runtime's task and stream machinery (a
/// spawned task is charged to the code that spawned it). Matched after a
/// qualified path's leading `<` (and `&mut `).
const PLUMBING: [&str; 22] = [
    "_rjem",
    "je_",
    "prof_",
    "tikv_jemalloc",
    "__rust",
    "__rdl",
    "alloc::",
    "core::",
    "std::",
    "hashbrown::",
    "serde::",
    "serde_core::",
    "serde_json::",
    "k8s_openapi::",
    "tokio::runtime::",
    "tracing::",
    "tracing_subscriber::",
    "futures_util::",
    "futures_core::",
    "S as futures_core::",
    "bytes::",
    "kube_runtime::utils::",
];

fn is_plumbing(name: &str) -> bool {
    let path = name.trim_start_matches('<').trim_start_matches("&mut ");
    name.is_empty() || PLUMBING.iter().any(|prefix| path.starts_with(prefix))
}

/// Reads the heap profile of the CCM serving `addr` and sums it by site.
pub(crate) fn read(addr: SocketAddr) -> anyhow::Result<HeapProfile> {
    let (status, body) = http::get_https_bytes(addr, "/debug/pprof/heap", None)?;
    ensure!(
        status == 200,
        "GET /debug/pprof/heap answered {status}: {}",
        String::from_utf8_lossy(&body)
    );
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(body.as_slice())
        .read_to_end(&mut raw)
        .context("the heap profile is not gzipped")?;
    summarize(&raw)
}

/// Sums a pprof protobuf's first value by site.
fn summarize(raw: &[u8]) -> anyhow::Result<HeapProfile> {
    let profile = Profile::decode(raw).context("the heap profile is not a pprof protobuf")?;
    let name = |index: i64| {
        usize::try_from(index)
            .ok()
            .and_then(|i| profile.string_table.get(i))
            .map_or("", String::as_str)
    };
    let functions: HashMap<u64, &str> = profile
        .function
        .iter()
        .map(|f| (f.id, name(f.name)))
        .collect();
    let frames: HashMap<u64, Vec<&str>> = profile
        .location
        .iter()
        .map(|l| {
            let names = l
                .line
                .iter()
                .map(|line| functions.get(&line.function_id).copied().unwrap_or(""))
                .collect();
            (l.id, names)
        })
        .collect();
    let mut sites: HashMap<String, u64> = HashMap::new();
    let mut total = 0;
    for sample in &profile.sample {
        let bytes = sample
            .value
            .first()
            .copied()
            .unwrap_or(0)
            .try_into()
            .unwrap_or(0u64);
        total += bytes;
        let site = sample
            .location_id
            .iter()
            .flat_map(|id| frames.get(id).into_iter().flatten())
            .find(|frame| !is_plumbing(frame))
            .map_or_else(|| "(unsymbolized)".to_owned(), |frame| trim(frame));
        *sites.entry(site).or_default() += bytes;
    }
    let mut sites: Vec<(String, u64)> = sites.into_iter().collect();
    sites.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(HeapProfile { total, sites })
}

/// A function's name without its generic arguments' paths, which can run
/// to hundreds of characters in async code.
fn trim(name: &str) -> String {
    // A qualified path (`<T as Trait>::f`) keeps its outer brackets.
    let keep = usize::from(name.starts_with('<'));
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '<' => {
                depth += 1;
                if depth <= keep {
                    out.push('<');
                } else if depth == keep + 1 {
                    out.push_str("<…>");
                }
            }
            '>' => {
                if depth <= keep {
                    out.push('>');
                }
                depth = depth.saturating_sub(1);
            }
            _ if depth <= keep => out.push(c),
            _ => {}
        }
    }
    out
}

impl HeapProfile {
    /// The `n` largest sites, and the rest summed.
    pub(crate) fn top(&self, n: usize) -> Vec<(String, u64)> {
        let mut top: Vec<(String, u64)> = self.sites.iter().take(n).cloned().collect();
        let rest: u64 = self.sites.iter().skip(n).map(|(_, b)| b).sum();
        if rest > 0 {
            top.push((format!("{} other sites", self.sites.len() - n), rest));
        }
        top
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> Vec<u8> {
        let strings = [
            "",
            "_rjem_malloc",
            "alloc::raw_vec::RawVec<T,A>::grow_one",
            "ccm_runtime::informer::Informer<K>::publish",
            "kube_client::client::Client::request_text::{{closure}}",
        ];
        Profile {
            string_table: strings.iter().map(|s| (*s).to_owned()).collect(),
            function: (1..=4)
                .map(|id| Function {
                    id,
                    name: id as i64,
                })
                .collect(),
            location: vec![
                Location {
                    id: 1,
                    line: vec![Line { function_id: 1 }],
                },
                // An inlined frame: the growth path inside the caller.
                Location {
                    id: 2,
                    line: vec![Line { function_id: 2 }, Line { function_id: 3 }],
                },
                Location {
                    id: 3,
                    line: vec![Line { function_id: 4 }],
                },
            ],
            sample: vec![
                Sample {
                    location_id: vec![1, 2, 3],
                    value: vec![3 << 20],
                },
                Sample {
                    location_id: vec![1, 3],
                    value: vec![1 << 20],
                },
                Sample {
                    location_id: vec![1, 2],
                    value: vec![1 << 20],
                },
            ],
        }
        .encode_to_vec()
    }

    #[test]
    fn live_bytes_are_summed_by_the_first_frame_past_the_plumbing() {
        let heap = summarize(&profile()).unwrap();
        assert_eq!(heap.total, 5 << 20);
        assert_eq!(
            heap.sites,
            vec![
                (
                    "ccm_runtime::informer::Informer<…>::publish".to_owned(),
                    4 << 20
                ),
                (
                    "kube_client::client::Client::request_text::{{closure}}".to_owned(),
                    1 << 20
                ),
            ]
        );
        assert_eq!(
            heap.top(1),
            vec![
                (
                    "ccm_runtime::informer::Informer<…>::publish".to_owned(),
                    4 << 20
                ),
                ("1 other sites".to_owned(), 1 << 20),
            ]
        );
    }

    #[test]
    fn generic_arguments_are_left_out_of_names() {
        assert_eq!(
            trim("<kube_runtime::reflector::store::Writer<K> as Foo>::apply"),
            "<kube_runtime::reflector::store::Writer<…> as Foo>::apply"
        );
        assert_eq!(trim("a::b<T>::c"), "a::b<…>::c");
    }

    #[test]
    fn what_is_not_a_profile_is_an_error() {
        assert!(summarize(b"\xff\xff\xff").is_err());
    }
}
