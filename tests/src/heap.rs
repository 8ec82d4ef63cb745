//! Heap snapshots in pprof's `profile.proto`, as a profiled service writes them (jemalloc's
//! `inuse_space`, with function names), for tests of ProfileOps' heap summaries: each stack
//! is its frames, callee first, and its live bytes.

use libdd_profiling_protobuf::prost_impls::{
    Function, Line, Location, Message, Profile, Sample, ValueType,
};

/// An uncompressed pprof heap profile of `stacks` (`(frames callee first, live bytes)`).
pub fn pprof(stacks: &[(&[&str], i64)]) -> Vec<u8> {
    let mut strings = vec![String::new(), "inuse_space".to_owned(), "bytes".to_owned()];
    let mut functions: Vec<Function> = Vec::new();
    let mut locations: Vec<Location> = Vec::new();
    let mut samples = Vec::new();
    for (frames, bytes) in stacks {
        let mut ids = Vec::new();
        for name in *frames {
            let at = match functions
                .iter()
                .position(|f| strings[f.name as usize] == *name)
            {
                Some(i) => i,
                None => {
                    strings.push((*name).to_owned());
                    let id = functions.len() as u64 + 1;
                    let name = strings.len() as i64 - 1;
                    functions.push(Function {
                        id,
                        name,
                        system_name: name,
                        filename: 0,
                    });
                    locations.push(Location {
                        id,
                        mapping_id: 0,
                        address: 0x1000 * id,
                        lines: vec![Line {
                            function_id: id,
                            line: 0,
                        }],
                        is_folded: false,
                    });
                    functions.len() - 1
                }
            };
            ids.push(locations[at].id);
        }
        samples.push(Sample {
            location_ids: ids,
            values: vec![*bytes],
            labels: vec![],
        });
    }
    Profile {
        sample_types: vec![ValueType { r#type: 1, unit: 2 }],
        samples,
        locations,
        functions,
        string_table: strings,
        ..Default::default()
    }
    .encode_to_vec()
}
