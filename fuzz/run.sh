#!/usr/bin/env bash
# Runs every cargo-fuzz target found in fuzz/fuzz_targets/ for SECONDS_PER_TARGET seconds.
#
#   fuzz/run.sh [SECONDS_PER_TARGET]      (default 60)
#
# Needs a nightly toolchain (`cargo +nightly`); installs cargo-fuzz if it is missing. Adding a
# target is adding a file fuzz_targets/NAME.rs: if fuzz/Cargo.toml has no [[bin]] for it yet,
# this script appends one (commit that change). Seed inputs in fuzz/seeds/NAME/ are used when
# present; the growing corpus lives in fuzz/corpus/NAME/ and crashes in fuzz/artifacts/NAME/
# (both ignored by git). Every target runs even if an earlier one crashed; the exit status is
# non-zero if any did.
set -euo pipefail

secs="${1:-60}"
if ! [[ "$secs" =~ ^[0-9]+$ ]] || [ "$secs" -eq 0 ]; then
    echo "usage: $0 [SECONDS_PER_TARGET]  (a positive integer, default 60)" >&2
    exit 2
fi

fuzz_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$fuzz_dir")"
manifest="$fuzz_dir/Cargo.toml"

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "error: no nightly toolchain; install one with: rustup toolchain install nightly" >&2
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz not found: installing it"
    cargo install cargo-fuzz --locked
fi

shopt -s nullglob
targets=()
for file in "$fuzz_dir"/fuzz_targets/*.rs; do
    name="$(basename "$file" .rs)"
    if ! grep -q "^name = \"$name\"\$" "$manifest"; then
        echo "note: adding a [[bin]] entry for new target '$name' to fuzz/Cargo.toml"
        printf '\n[[bin]]\nname = "%s"\npath = "fuzz_targets/%s.rs"\ntest = false\ndoc = false\nbench = false\n' \
            "$name" "$name" >>"$manifest"
    fi
    targets+=("$name")
done
if [ "${#targets[@]}" -eq 0 ]; then
    echo "error: no fuzz targets in $fuzz_dir/fuzz_targets" >&2
    exit 1
fi

cd "$root"
failed=()
for t in "${targets[@]}"; do
    echo "=== fuzzing $t for ${secs}s"
    corpora=("$fuzz_dir/corpus/$t")
    mkdir -p "${corpora[0]}"
    if [ -d "$fuzz_dir/seeds/$t" ]; then
        corpora+=("$fuzz_dir/seeds/$t")
    fi
    if ! cargo +nightly fuzz run "$t" "${corpora[@]}" -- -max_total_time="$secs"; then
        failed+=("$t")
    fi
done

echo
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz targets that failed: ${failed[*]}" >&2
    echo "crash inputs are in $fuzz_dir/artifacts/<target>/; reproduce with:" >&2
    echo "  cargo +nightly fuzz run <target> <artifact file>" >&2
    exit 1
fi
echo "all ${#targets[@]} fuzz targets ran ${secs}s without a crash: ${targets[*]}"
