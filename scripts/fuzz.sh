#!/usr/bin/env bash
# Coverage-guided fuzzing of every decoder a peer or a file can feed Stampede (docs/CHECKS.md
# "Fuzzing"; the targets and what each checks: crates/stampede-fuzz).
#
#   scripts/fuzz.sh                  each target until 10^7 runs or one CPU-hour, whichever first
#   scripts/fuzz.sh --brief [SECS]   each target for SECS seconds (default 10): what CI runs
#   scripts/fuzz.sh [--brief [SECS]] TARGET...   only these targets
#   FUZZ_JOBS=2 scripts/fuzz.sh      two targets at a time (one core each)
#
# cargo-fuzz (installed here if missing) builds the targets with libFuzzer's coverage
# instrumentation on the stable toolchain (`--sanitizer none`: no nightly flag); Rust's own checks
# (bounds, overflow, debug assertions) and each target's assertions are what fail. New inputs the
# fuzzer keeps go to fuzz/target/corpus (not committed); the committed corpus is read, not written.
# A failure leaves its input in fuzz/artifacts/<target>/; the script says how to replay it and
# keep it as a regression (fuzz/regressions/<target>/, replayed by `cargo test -p stampede-fuzz`).
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2
RUNS_MAX=10000000
SECONDS_MAX=3600
if [ "${1:-}" = "--brief" ]; then
    shift
    RUNS_MAX=-1
    SECONDS_MAX=10
    if [[ "${1:-}" =~ ^[0-9]+$ ]]; then SECONDS_MAX=$1; shift; fi
fi
INPUT_BYTES_MAX=65536 # stampede_fuzz::INPUT_BYTES_MAX
JOBS=${FUZZ_JOBS:-1}

if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
    echo "== installing cargo-fuzz $CARGO_FUZZ_VERSION (once)"
    cargo install -q cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
fi

mapfile -t known < <(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^stampede-fuzz-targets$')
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=("${known[@]}")
fi
for target in "${targets[@]}"; do
    if [[ " ${known[*]} " != *" $target "* ]]; then
        echo "fuzz.sh: no fuzz target \"$target\"; the targets are: ${known[*]}" >&2
        exit 2
    fi
done

echo "== building ${#targets[@]} targets (release, coverage-instrumented; ~6 min the first time)"
(cd fuzz && cargo fuzz build -s none)
binaries=fuzz/target/x86_64-unknown-linux-gnu/release

# Brief and long runs log apart: CI's brief run may overlap a long one.
logs=fuzz/target/logs-$([ "$RUNS_MAX" = -1 ] && echo brief || echo long)
mkdir -p "$logs"

run_one() {
    local target=$1
    local kept=fuzz/target/corpus/$target
    mkdir -p "$kept" "fuzz/artifacts/$target"
    "$binaries/$target" "$kept" "fuzz/corpus/$target" \
        -runs="$RUNS_MAX" -max_total_time="$SECONDS_MAX" -max_len="$INPUT_BYTES_MAX" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$target/" \
        >"$logs/$target.log" 2>&1
}

summarise() {
    local target=$1 status=$2 log=$logs/$1.log
    local runs speed cov features corpus
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    features=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    corpus=$(grep -o 'corp: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    printf '%-16s %12s %10s %8s %8s %8s  %s\n' "$target" "${runs:-?}" "${speed:-?}" "${cov:-?}" "${features:-?}" \
        "${corpus:-?}" "$status"
}

echo "== fuzzing each target: at most $RUNS_MAX runs (-1: no bound) and $SECONDS_MAX s, $JOBS at a time"
printf '%-16s %12s %10s %8s %8s %8s  %s\n' target runs "runs/s" cov features corpus result
failed=()
pending=("${targets[@]}")
while [ ${#pending[@]} -gt 0 ]; do
    batch=("${pending[@]:0:$JOBS}")
    pending=("${pending[@]:$JOBS}")
    pids=()
    for target in "${batch[@]}"; do
        run_one "$target" &
        pids+=($!)
    done
    for i in "${!batch[@]}"; do
        if wait "${pids[$i]}"; then
            summarise "${batch[$i]}" passed
        else
            summarise "${batch[$i]}" FAILED
            failed+=("${batch[$i]}")
        fi
    done
done

if [ ${#failed[@]} -gt 0 ]; then
    for target in "${failed[@]}"; do
        echo "-- $target failed; its log: $logs/$target.log; the input it kept:"
        ls "fuzz/artifacts/$target/"
        grep -m1 -A3 "panicked\|ERROR" "$logs/$target.log" || true
        echo "   replay: (cd fuzz && cargo fuzz run -s none $target artifacts/$target/<file>)"
        echo "   once fixed, keep it: cp fuzz/artifacts/$target/<file> fuzz/regressions/$target/"
    done
    exit 1
fi
echo "== every target passed"
