#!/usr/bin/env bash
# Runs the fuzz targets: all of them, or the one named as $1, each for
# ${FUZZ_SECONDS:-60} seconds. New corpus entries land in fuzz/corpus/<target>/ under
# hash names and crashes in fuzz/artifacts/<target>/; both are gitignored, only seed-*
# files are committed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds="${FUZZ_SECONDS:-60}"
all_targets=(channel_codec frame_decode peer_frames v3_frames v4_frames connection_state)
if [[ $# -gt 0 ]]; then
    targets=("$1")
else
    targets=("${all_targets[@]}")
fi

if ! command -v cargo-fuzz >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

# cargo-fuzz needs nightly-only flags (sanitizers); this lets a stable toolchain accept them.
export RUSTC_BOOTSTRAP=1

failed=()
for target in "${targets[@]}"; do
    echo "== fuzzing ${target} for ${seconds}s"
    mkdir -p "fuzz/corpus/${target}"
    flags=(--debug-assertions)
    options=()
    if [[ "${target}" == connection_state ]]; then
        # A whole node per input: without AddressSanitizer (the node has no unsafe code; the
        # wire's is fuzzed under it by the frame targets) and without compare tracing, a tenth
        # of the CPU time a run. Its own target directory keeps the others' build. The driver
        # reads at most 128 script bytes, so longer inputs are not made.
        flags+=(--sanitizer none --no-trace-compares --target-dir fuzz/target/plain)
        options+=(-max_len=128)
    fi
    if ! cargo fuzz run "${flags[@]}" "${target}" "fuzz/corpus/${target}" -- \
        -max_total_time="${seconds}" -print_final_stats=1 "${options[@]}"; then
        failed+=("${target}")
    fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
    echo "findings in: ${failed[*]} (inputs under fuzz/artifacts/)" >&2
    exit 1
fi
