#!/usr/bin/env bash
# The main job: the Smart Kiosk (docs/APPLICATIONS.md) on the embedded runtime, with its live
# dashboard (the URL is printed). Arguments go to the kiosk: --headless --seconds N, --port P, ...
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/python-env.sh
python_env
exec .venv/bin/python -m stampede.apps.kiosk "$@"
