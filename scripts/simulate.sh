#!/usr/bin/env bash
# The long runs of the seeded simulations (docs/CHECKS.md): the distributed ts_min protocol's
# (crates/stampede-core/tests/mesh_simulation.rs), the linked runtimes' (crates/stampede/tests/
# mesh_link_sim.rs) and the whole path's (clients and a mesh of nodes: crates/stampede-node/src/sim), in
# release builds, each split into one shard per core. Every shard prints its
# "N seeds passed (from seed S)" line; a failing seed stops its shard with the seed to replay.
#
# Usage: ./scripts/simulate.sh [protocol seeds (default 1000000)] [linked seeds (default 1000000)]
#                              [whole-path seeds (default 100000)]
set -euo pipefail
cd "$(dirname "$0")/.."
protocol_seeds="${1:-1000000}"
linked_seeds="${2:-1000000}"
path_seeds="${3:-100000}"
shards="$(nproc)"

# The test binary cargo builds for `cargo test --release $*`, without running it.
binary() {
    cargo test --release --no-run --message-format=json "$@" 2>/dev/null \
        | python3 -c 'import json,sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable")][-1])'
}

# run NAME BINARY TEST SEEDS_VAR FROM_VAR FIRST TOTAL: TOTAL seeds from FIRST, one shard per core.
run() {
    local name=$1 bin=$2 test=$3 seeds_var=$4 from_var=$5 first=$6 total=$7
    local per=$(((total + shards - 1) / shards)) pids=() started=$SECONDS
    echo "== $name: $total seeds in $shards shards of $per"
    for ((i = 0; i < shards; i++)); do
        local from=$((first + i * per)) count=$per
        [ $((from + count)) -gt $((first + total)) ] && count=$((first + total - from))
        [ "$count" -le 0 ] && continue
        env "$seeds_var=$count" "$from_var=$from" "$bin" --exact "$test" --nocapture 2>&1 \
            | grep -E "seeds passed|failed|panicked|replay" &
        pids+=($!)
    done
    local status=0
    for pid in "${pids[@]}"; do wait "$pid" || status=1; done
    echo "== $name: $((SECONDS - started)) s"
    return $status
}

echo "== Building the simulations (release)"
protocol=$(binary -p stampede-core --test mesh_simulation)
# The linked runtimes need no fabric: the facade without its remote feature (no zenoh to build).
linked=$(binary -p stampede --no-default-features --test mesh_link_sim)
path=$(binary -p stampede-node --lib)
run "mesh protocol simulation" "$protocol" ts_min_is_safe_and_live_under_delays_duplicates_and_crashes \
    STAMPEDE_MESH_SEEDS STAMPEDE_MESH_SEEDS_FROM 0 "$protocol_seeds"
run "linked runtimes simulation" "$linked" linked_runtimes_keep_ts_min_global_over_seeds \
    STAMPEDE_MESH_LINK_SEEDS STAMPEDE_MESH_LINK_SEEDS_FROM 1 "$linked_seeds"
run "whole-path simulation" "$path" sim::the_whole_path_keeps_every_rule_under_faults \
    STAMPEDE_PATH_SEEDS STAMPEDE_PATH_SEEDS_FROM 1 "$path_seeds"
