# Sourced by scripts/sweep and scripts/test: one virtual environment, built from the repo's own
# pins (constraints/ci.txt), so a fresh machine needs nothing installed by hand.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${PATCHLANE_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
STAMP="$VENV/.patchlane-setup"
WANT="$(cat "$ROOT/constraints/ci.txt" "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)"
if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "== installing patchlane with torch 2.13.0 (CPU), megatron-core 0.16.1, liger-kernel 0.8.1" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    -c "$ROOT/constraints/ci.txt" torch -e "$ROOT[megatron,liger,dev]" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" >&2 || true
  "$VENV/bin/python" -c "import patchlane, torch, megatron.core" \
    || { echo "setup failed: see the pip output above" >&2; exit 1; }
  echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
cd "$ROOT"
