#!/usr/bin/env bash
# The whole test suite: Rust (unit, rules, model, stress, example, doc tests) and Python.
# Installs what it needs (Python packages into .venv) on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== Rust tests"
cargo test --workspace --all-targets
cargo test --workspace --doc
