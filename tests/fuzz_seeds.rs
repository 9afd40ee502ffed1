//! Every fuzz target's committed seeds (`fuzz/corpus/<target>/seed-*`, minimized finds among
//! them) replayed under `cargo test` through the target's own driver (`fuzz/driver/`), which
//! asserts the target's invariants. A target with no seeds fails.

#[path = "../fuzz/driver/channel_codec.rs"]
mod channel_codec;
#[path = "../fuzz/driver/connection_state.rs"]
mod connection_state;
#[path = "../fuzz/driver/frame_decode.rs"]
mod frame_decode;
#[path = "../fuzz/driver/peer_frames.rs"]
mod peer_frames;
#[path = "../fuzz/driver/round_trip.rs"]
mod round_trip;
#[path = "../fuzz/driver/v3_frames.rs"]
mod v3_frames;
#[path = "../fuzz/driver/v4_frames.rs"]
mod v4_frames;
#[path = "../fuzz/driver/values.rs"]
mod values;

use std::path::{Path, PathBuf};

/// Feeds each `seed-*` of `target`'s corpus to `run`, in name order; fails when there is none.
fn replay(target: &str, run: impl Fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut seeds: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("the seed corpus {}: {err}", dir.display()))
        .map(|entry| entry.expect("a corpus entry").path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("seed-"))
        })
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "no seed-* inputs in {}", dir.display());
    for seed in seeds {
        let input = std::fs::read(&seed).expect("read a seed");
        eprintln!("{}", seed.display());
        run(&input);
    }
}

#[test]
fn every_channel_codec_seed_keeps_its_invariants() {
    replay("channel_codec", channel_codec::run);
}

#[test]
fn every_frame_decode_seed_keeps_its_invariants() {
    replay("frame_decode", frame_decode::run);
}

#[test]
fn every_peer_frames_seed_keeps_its_invariants() {
    replay("peer_frames", peer_frames::run);
}

#[test]
fn every_v3_frames_seed_keeps_its_invariants() {
    replay("v3_frames", v3_frames::run);
}

#[test]
fn every_v4_frames_seed_keeps_its_invariants() {
    replay("v4_frames", v4_frames::run);
}

#[test]
fn every_connection_state_seed_keeps_its_invariants() {
    replay("connection_state", |script| {
        let report = connection_state::run(script);
        eprintln!("  {report:?}");
    });
}
