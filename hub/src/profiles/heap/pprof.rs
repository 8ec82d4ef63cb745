//! pprof's `profile.proto` read into a [`Snapshot`]: gunzipped when it is gzip (at most
//! [`MAX_DECODED_BYTES`]), decoded with `libdd-profiling-protobuf`'s prost types, each
//! sample's stack (leaf first; a location's inlined lines callee first) turned into frames
//! (function names, or `0x<address> in <mapping>` where the profile has none) and summed by
//! site.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Read;

use libdd_profiling_protobuf::prost_impls::{Message, Profile};

use super::{HeapError, MAX_DECODED_BYTES, Snapshot, site_of};

/// Most frames read of one stack.
const MAX_STACK: usize = 256;

/// `bytes` unzipped when they are gzip, within the size cap.
fn unzip(bytes: &[u8]) -> Result<Cow<'_, [u8]>, HeapError> {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        if bytes.len() as u64 > MAX_DECODED_BYTES {
            return Err(HeapError::TooLarge(MAX_DECODED_BYTES));
        }
        return Ok(Cow::Borrowed(bytes));
    }
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .take(MAX_DECODED_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| HeapError::Gzip(e.to_string()))?;
    if out.len() as u64 > MAX_DECODED_BYTES {
        return Err(HeapError::TooLarge(MAX_DECODED_BYTES));
    }
    Ok(Cow::Owned(out))
}

/// `bytes` decoded into a profile (unzipped first when gzip).
fn decode(bytes: &[u8]) -> Result<Profile, HeapError> {
    if bytes.is_empty() {
        return Err(HeapError::Empty);
    }
    let raw = unzip(bytes)?;
    Profile::decode(&raw[..]).map_err(|e| HeapError::Malformed(e.to_string()))
}

/// String `i` of `p`'s table (empty when out of range).
fn text(p: &Profile, i: i64) -> &str {
    usize::try_from(i)
        .ok()
        .and_then(|i| p.string_table.get(i))
        .map_or("", String::as_str)
}

/// Which of `p`'s sample values are live bytes and, when counted, live objects; a profile
/// without them is not a heap profile.
fn heap_values(p: &Profile) -> Result<(usize, Option<usize>), HeapError> {
    let types: Vec<&str> = p.sample_types.iter().map(|t| text(p, t.r#type)).collect();
    let at = |names: &[&str]| names.iter().find_map(|n| types.iter().position(|t| t == n));
    let bytes_at =
        at(&["inuse_space", "space"]).ok_or_else(|| HeapError::NotHeap(types.join(", ")))?;
    Ok((bytes_at, at(&["inuse_objects", "objects"])))
}

/// Reads a pprof heap profile.
pub(crate) fn read(bytes: &[u8]) -> Result<Snapshot, HeapError> {
    let p = decode(bytes)?;
    let (bytes_at, objects_at) = heap_values(&p)?;
    let text = |i: i64| text(&p, i);
    let functions: HashMap<u64, &str> = p
        .functions
        .iter()
        .map(|f| {
            let name = Some(text(f.name))
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| text(f.system_name));
            (f.id, name)
        })
        .collect();
    let mappings: HashMap<u64, &str> = p
        .mappings
        .iter()
        .map(|m| {
            let file = text(m.filename);
            (m.id, file.rsplit('/').next().unwrap_or(file))
        })
        .collect();
    let mut symbolized = false;
    let locations: HashMap<u64, Vec<String>> = p
        .locations
        .iter()
        .map(|l| {
            let named: Vec<String> = l
                .lines
                .iter()
                .filter_map(|line| functions.get(&line.function_id))
                .filter(|n| !n.is_empty())
                .map(|n| (*n).to_owned())
                .collect();
            symbolized |= !named.is_empty();
            let frames = if named.is_empty() {
                match mappings.get(&l.mapping_id).filter(|m| !m.is_empty()) {
                    Some(m) => vec![format!("{:#x} in {m}", l.address)],
                    None => vec![format!("{:#x}", l.address)],
                }
            } else {
                named
            };
            (l.id, frames)
        })
        .collect();
    let mut snap = Snapshot {
        has_objects: objects_at.is_some(),
        symbolized,
        ..Default::default()
    };
    for (n, sample) in p.samples.iter().enumerate() {
        let value = |i: usize| {
            sample.values.get(i).copied().ok_or_else(|| {
                HeapError::Malformed(format!(
                    "sample {n} has {} values for {} sample types",
                    sample.values.len(),
                    p.sample_types.len()
                ))
            })
        };
        let bytes = value(bytes_at)?;
        let objects = objects_at.map(value).transpose()?.unwrap_or(0);
        let mut frames = Vec::new();
        for id in &sample.location_ids {
            match locations.get(id) {
                Some(f) => frames.extend(f.iter().cloned()),
                None => frames.push(format!("location {id}")),
            }
            if frames.len() >= MAX_STACK {
                break;
            }
        }
        let usage = snap.sites.entry(site_of(&frames)).or_default();
        usage.bytes += bytes;
        usage.objects += objects;
        snap.total.bytes += bytes;
        snap.total.objects += objects;
    }
    Ok(snap)
}

/// `bytes` (a pprof heap profile: refused as [`read`] refuses it) with every absolute path
/// in its string table (mapping file names, source files) cut to `<redacted>/<file name>`
/// unless it is under one of `keep`; gzipped. Function names are not paths and stay.
pub(crate) fn redact(bytes: &[u8], keep: &[String]) -> Result<Vec<u8>, HeapError> {
    let mut p = decode(bytes)?;
    heap_values(&p)?;
    for s in &mut p.string_table {
        if s.starts_with('/') && !keep.iter().any(|k| s.starts_with(k.as_str())) {
            let file = s.rsplit('/').next().unwrap_or_default();
            *s = format!("{REDACTED}/{file}");
        }
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &p.encode_to_vec())
        .and_then(|()| gz.finish())
        .map_err(|e| HeapError::Gzip(e.to_string()))
}

/// What a redacted path's directory becomes.
pub(crate) const REDACTED: &str = "<redacted>";

#[cfg(test)]
/// A Go-style heap profile (four sample types) naming its functions.
pub(crate) fn go_style(leak_bytes: i64) -> Vec<u8> {
    use libdd_profiling_protobuf::prost_impls::{
        Function, Line, Location, Mapping, Sample, ValueType,
    };
    use std::io::Write;
    let strings: Vec<String> = [
        "",
        "alloc_objects",
        "count",
        "alloc_space",
        "bytes",
        "inuse_objects",
        "inuse_space",
        "runtime.mallocgc",
        "main.leakCache",
        "main.main",
        "/srv/app",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let vt = |t, u| ValueType { r#type: t, unit: u };
    let func = |id, name| Function {
        id,
        name,
        system_name: name,
        filename: 0,
    };
    let loc = |id, f| Location {
        id,
        mapping_id: 1,
        address: 0x1000 * id,
        lines: vec![Line {
            function_id: f,
            line: 7,
        }],
        is_folded: false,
    };
    let p = Profile {
        sample_types: vec![vt(1, 2), vt(3, 4), vt(5, 2), vt(6, 4)],
        samples: vec![
            Sample {
                location_ids: vec![1, 2, 3],
                values: vec![9, 900, 3, leak_bytes],
                labels: vec![],
            },
            Sample {
                location_ids: vec![1, 3],
                values: vec![1, 100, 1, 64],
                labels: vec![],
            },
        ],
        mappings: vec![Mapping {
            id: 1,
            filename: 10,
            ..Default::default()
        }],
        locations: vec![loc(1, 1), loc(2, 2), loc(3, 3)],
        functions: vec![func(1, 7), func(2, 8), func(3, 9)],
        string_table: strings,
        drop_frames: 0,
        keep_frames: 0,
        time_nanos: 0,
        duration_nanos: 0,
        period_type: None,
        period: 0,
        comment: vec![],
        default_sample_type: 0,
    };
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&p.encode_to_vec()).unwrap();
    gz.finish().unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_profile_reads_into_sites_of_the_allocating_function() {
        let s = read(&go_style(4096)).unwrap();
        assert!(s.symbolized && s.has_objects);
        let leak = s.sites[&vec!["main.leakCache".to_owned(), "main.main".to_owned()]];
        assert_eq!((leak.bytes, leak.objects), (4096, 3));
        assert_eq!(s.total.bytes, 4096 + 64);
        let grown = super::super::diff(Some(&read(&go_style(1024)).unwrap()), &s);
        assert_eq!(
            (grown[0].function.as_str(), grown[0].growth_bytes),
            ("main.leakCache", 3072)
        );
    }

    #[test]
    fn jemalloc_pprofs_encoding_reads_as_addresses_in_their_mapping() {
        // pprof_util is what jemalloc_pprof encodes with: one sample type, no symbols.
        let mut prof = pprof_util::StackProfile::default();
        prof.push_mapping(pprof_util::Mapping {
            memory_start: 0x1000,
            memory_end: 0x9000,
            memory_offset: 0,
            file_offset: 0,
            pathname: "/usr/bin/demo".into(),
            build_id: None,
        });
        prof.push_stack(
            pprof_util::WeightedStack {
                addrs: vec![0x1101, 0x2201],
                weight: 8192.0,
            },
            None,
        );
        let bytes = prof.to_pprof(("inuse_space", "bytes"), ("space", "bytes"), None);
        let s = read(&bytes).unwrap();
        assert!(!s.symbolized && !s.has_objects);
        assert_eq!(s.total.bytes, 8192);
        let (site, _) = s.sites.iter().next().unwrap();
        assert!(site[0].ends_with(" in demo"), "{site:?}");
    }

    #[test]
    fn what_is_not_a_heap_profile_is_refused_precisely() {
        assert_eq!(read(b"").unwrap_err(), HeapError::Empty);
        assert!(matches!(
            read(&[0x1f, 0x8b, 8, 0, 1, 2, 3]),
            Err(HeapError::Gzip(_))
        ));
        assert!(matches!(
            read(b"\xff\xff\xff\xff not protobuf"),
            Err(HeapError::Malformed(_))
        ));
        let whole = go_style(1);
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&whole[..])
            .read_to_end(&mut raw)
            .unwrap();
        assert!(
            matches!(read(&raw[..raw.len() / 2]), Err(HeapError::Malformed(_))),
            "truncated"
        );
        let mut cpu = Profile::decode(&raw[..]).unwrap();
        cpu.string_table[1] = "cpu".into();
        cpu.string_table[3] = "wall".into();
        cpu.string_table[5] = "samples".into();
        cpu.string_table[6] = "nanoseconds".into();
        assert_eq!(
            read(&cpu.encode_to_vec()).unwrap_err(),
            HeapError::NotHeap("cpu, wall, samples, nanoseconds".into())
        );
    }

    #[test]
    fn redaction_cuts_paths_to_their_file_name_and_keeps_the_sites() {
        let whole = go_style(4096);
        let strings = |bytes: &[u8]| {
            Profile::decode(&unzip(bytes).unwrap()[..])
                .unwrap()
                .string_table
        };
        let redacted = redact(&whole, &[]).unwrap();
        let table = strings(&redacted);
        assert!(table.contains(&"<redacted>/app".to_owned()), "{table:?}");
        assert!(!table.iter().any(|s| s.starts_with("/srv")), "{table:?}");
        assert!(table.contains(&"main.leakCache".to_owned()));
        let (before, after) = (read(&whole).unwrap(), read(&redacted).unwrap());
        assert_eq!((before.sites, before.total), (after.sites, after.total));
        // A path under a kept prefix stays whole.
        assert!(
            strings(&redact(&whole, &["/srv/".into()]).unwrap()).contains(&"/srv/app".to_owned())
        );
        assert!(matches!(
            redact(b"not a profile", &[]),
            Err(HeapError::Malformed(_))
        ));
    }
}
