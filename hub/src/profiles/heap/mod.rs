//! Heap snapshots: what a service's profiling mode writes about its live heap, read into one
//! shape ([`Snapshot`]: live bytes and objects by allocation stack), and two of them diffed
//! into the sites that grew most ([`diff`]).
//!
//! - [`pprof`]: pprof's `profile.proto` (gzipped or not), what jemalloc's profiling (through
//!   `jemalloc_pprof`), Go's runtime and many agents write. Decoded with the prost types of
//!   `libdd-profiling-protobuf` (Datadog's); the bytes sample type is `inuse_space` (else
//!   `space`), objects `inuse_objects` when the profile has them.
//!
//! - [`heaptrack`]: heaptrack's trace of a native process (its recorder preloaded into the
//!   profiling argv), interpreted into heaptrack's data format and read with
//!   `heaptrack_print` into the bytes live per stack.
//!
//! [`collect`] keeps a session's snapshots as artifacts and summarizes them.
//!
//! A site is a stack from its first frame outside the allocator (`malloc`, jemalloc,
//! `alloc::`, Go's `runtime.mallocgc`, ...), so the function named is the one that allocated,
//! with the frames that called it.

pub(crate) mod collect;
pub(crate) mod heaptrack;
pub(crate) mod pprof;

use std::collections::HashMap;

use mcp_shared::profiling::HeapSite;

/// Most frames a site keeps (from the allocating function on).
pub(crate) const SITE_FRAMES: usize = 6;
/// Most bytes of one frame's name kept (C++ and Rust generics can run long).
pub(crate) const FRAME_BYTES: usize = 512;
/// Most sites a summary lists.
pub(crate) const TOP_SITES: usize = 10;
/// Most bytes a snapshot may take once decompressed.
pub(crate) const MAX_DECODED_BYTES: u64 = 256 * 1024 * 1024;

/// The file name of a kept snapshot (its format's extension: heaptrack_print opens a file
/// by it).
pub(crate) fn snapshot_file_name(meta: &mcp_shared::profiling::ArtifactMeta) -> String {
    let [pprof, heaptrack] = SNAPSHOT_EXTENSIONS;
    let ext = match meta.format.as_deref() {
        Some("heaptrack") => heaptrack,
        _ => pprof,
    };
    format!("{}{ext}", meta.artifact_id)
}

/// The endings of kept snapshots' files (pprof, heaptrack).
pub(crate) const SNAPSHOT_EXTENSIONS: [&str; 2] = [".pb.gz", ".heaptrack.gz"];

/// Why a snapshot could not be read.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub(crate) enum HeapError {
    #[error("the snapshot is empty (the service may still be writing it)")]
    Empty,
    #[error("the snapshot is larger than {0} bytes once decompressed")]
    TooLarge(u64),
    #[error("the snapshot's gzip data is damaged or cut short: {0}")]
    Gzip(String),
    #[error("the snapshot is not a pprof profile: {0}")]
    Malformed(String),
    #[error("the profile has no heap sample type (inuse_space or space), only: {0}")]
    NotHeap(String),
    #[error("{0}")]
    Tool(String),
}

/// Live heap by site.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    pub(crate) bytes: i64,
    pub(crate) objects: i64,
}

/// One heap snapshot, read.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    /// Live usage by site (its frames, the allocating function first).
    pub(crate) sites: HashMap<Vec<String>, Usage>,
    pub(crate) total: Usage,
    /// Whether the profile counts objects.
    pub(crate) has_objects: bool,
    /// Whether frames carry function names.
    pub(crate) symbolized: bool,
}

/// Frames that belong to the allocator, not to the code that allocated.
const ALLOCATOR: &[&str] = &[
    "malloc",
    "calloc",
    "realloc",
    "posix_memalign",
    "aligned_alloc",
    "operator new",
    "__libc_",
    "je_",
    "_rjem_",
    "prof_",
    "imalloc",
    "__rust_alloc",
    "__rustc::",
    "__rust_realloc",
    "__rdl_",
    "__rg_",
    "alloc::",
    "<alloc::",
    "core::alloc::",
    "std::alloc::",
    "<std::alloc::",
    "<tikv_jemallocator::",
    "tikv_jemallocator::",
    "<mimalloc::",
    "mi_",
    "runtime.mallocgc",
    "runtime.newobject",
    "runtime.makeslice",
    "runtime.growslice",
    "runtime.makemap",
    "runtime.rawstring",
];

/// Whether `frame` is the allocator's.
pub(crate) fn is_allocator(frame: &str) -> bool {
    ALLOCATOR.iter().any(|p| frame.starts_with(p))
        // A trait's method implemented by the standard library's allocation code:
        // `<u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem`.
        || (frame.starts_with('<')
            && (frame.contains(" as alloc::") || frame.contains(" as core::alloc::")))
}

/// A frame's function name as people read it: Rust symbols demangled (v0 and legacy,
/// without the hash); other names as they are.
pub(crate) fn function_name(raw: &str) -> String {
    if let Ok(name) = rustc_demangle::try_demangle(raw) {
        return format!("{name:#}");
    }
    // A legacy symbol a C++ demangler (heaptrack's) split into its path, leaving the hash and
    // the escapes (`leak::h0123456789abcdef`, `$u7b$$u7b$closure$u7d$$u7d$`): mangled again,
    // then demangled.
    if let Some((_, hash)) = raw.rsplit_once("::h")
        && hash.len() == 16
        && hash.bytes().all(|b| b.is_ascii_hexdigit())
    {
        let mut mangled = String::from("_ZN");
        for part in raw.split("::") {
            mangled.push_str(&format!("{}{part}", part.len()));
        }
        mangled.push('E');
        if let Ok(name) = rustc_demangle::try_demangle(&mangled) {
            return format!("{name:#}");
        }
    }
    raw.to_owned()
}

/// The site of a stack (`frames`, callee first): from its first frame outside the allocator,
/// at most [`SITE_FRAMES`]. Frames without a path (`from_elem<>`: what debug info names an
/// inlined function; C functions) between allocator frames are the allocator's too. A stack
/// of allocator frames only is its own site.
pub(crate) fn site_of(frames: &[String]) -> Vec<String> {
    let mut from = 0;
    for (i, f) in frames.iter().enumerate() {
        if is_allocator(f) {
            from = i + 1;
        } else if f.contains("::") {
            break;
        }
    }
    if from >= frames.len() {
        from = 0;
    }
    frames
        .iter()
        .skip(from)
        .take(SITE_FRAMES)
        .map(|f| {
            let mut cut = f.len().min(FRAME_BYTES);
            while !f.is_char_boundary(cut) {
                cut -= 1;
            }
            f[..cut].to_owned()
        })
        .collect()
}

/// The sites that grew most from `before` (none: from nothing) to `after`, largest growth
/// in bytes first, at most [`TOP_SITES`]; sites that shrank or stayed are left out.
pub(crate) fn diff(before: Option<&Snapshot>, after: &Snapshot) -> Vec<HeapSite> {
    let objects = after.has_objects && before.is_none_or(|b| b.has_objects);
    let mut grown: Vec<HeapSite> = after
        .sites
        .iter()
        .filter_map(|(site, now)| {
            let was = before
                .and_then(|b| b.sites.get(site))
                .copied()
                .unwrap_or_default();
            let growth = now.bytes - was.bytes;
            (growth > 0).then(|| HeapSite {
                function: site.first().cloned().unwrap_or_else(|| "?".to_owned()),
                frames: site.clone(),
                growth_bytes: growth,
                growth_objects: objects.then_some(now.objects - was.objects),
                bytes: now.bytes,
            })
        })
        .collect();
    grown.sort_by(|a, b| {
        b.growth_bytes
            .cmp(&a.growth_bytes)
            .then_with(|| a.frames.cmp(&b.frames))
    });
    grown.truncate(TOP_SITES);
    grown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(sites: &[(&[&str], i64, i64)]) -> Snapshot {
        let mut s = Snapshot {
            has_objects: true,
            symbolized: true,
            ..Default::default()
        };
        for (frames, bytes, objects) in sites {
            let frames: Vec<String> = frames.iter().map(|f| (*f).to_owned()).collect();
            let u = s.sites.entry(site_of(&frames)).or_default();
            u.bytes += bytes;
            u.objects += objects;
            s.total.bytes += bytes;
            s.total.objects += objects;
        }
        s
    }

    #[test]
    fn the_site_that_grew_most_comes_first_named_by_its_allocating_function() {
        let leak: &[&str] = &[
            "_rjem_je_prof_backtrace",
            "alloc::raw_vec::finish_grow",
            "demo::leak_cache",
            "demo::tick",
            "main",
        ];
        let steady: &[&str] = &["malloc", "demo::serve", "main"];
        let before = snap(&[(leak, 1_000, 10), (steady, 5_000, 50)]);
        let after = snap(&[
            (leak, 9_000, 90),
            (steady, 4_000, 40),
            (&["demo::other", "main"], 500, 5),
        ]);
        let top = diff(Some(&before), &after);
        assert_eq!(top[0].function, "demo::leak_cache");
        assert_eq!(top[0].frames, ["demo::leak_cache", "demo::tick", "main"]);
        assert_eq!(
            (top[0].growth_bytes, top[0].growth_objects),
            (8_000, Some(80))
        );
        assert_eq!(top[1].function, "demo::other");
        assert_eq!(top.len(), 2, "the site that shrank is not listed");
        // Without an earlier snapshot, growth is from nothing.
        assert_eq!(diff(None, &after)[0].growth_bytes, 9_000);
    }

    #[test]
    fn the_standard_librarys_allocation_frames_are_the_allocators() {
        // A jemalloc-profiled Rust service (Rust 1.95's symbol names), and C.
        let rust: Vec<String> = [
            "__rustc::__rust_alloc_zeroed",
            "alloc::alloc::Global::alloc_impl_runtime",
            "<alloc::alloc::Global as core::alloc::Allocator>::allocate_zeroed",
            "<u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem",
            "alloc::vec::from_elem",
            "retain_request_history",
            "mcp_demo_app::leak::start::{{closure}}",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(site_of(&rust)[0], "retain_request_history");
        let c: Vec<String> = ["malloc", "leak_cache", "main"].map(String::from).to_vec();
        assert_eq!(site_of(&c), ["leak_cache", "main"]);
        let only: Vec<String> = ["malloc", "je_malloc"].map(String::from).to_vec();
        assert_eq!(
            site_of(&only),
            only,
            "a stack of the allocator alone is its own site"
        );
    }
}
