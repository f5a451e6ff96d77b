#!/usr/bin/env bash
# The project's checks, as CI runs them: lint, types, architecture contracts, tests.
# Quick loop while editing: .venv/bin/pytest -m "not engine and not slow"
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
"$bin/ruff" check presto_tui tests benchmarks scripts
"$bin/mypy"
"$bin/lint-imports"
"$bin/pytest" -q --durations=8 "$@"
