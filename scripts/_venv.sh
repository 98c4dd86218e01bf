# Sourced by scripts/sweep, scripts/test and scripts/example: one virtual environment per Python
# interpreter, built from the repo's own pins, so a fresh machine needs nothing installed by hand.
#
#   PATCHPY_VERSION=3.11 (default)  .venv     constraints/ci.txt     torch 2.13.0 CPU build, megatron-core 0.16.1
#   PATCHPY_VERSION=3.12            .venv312  constraints/py312.txt  torch 2.13.0 CUDA build (runs on the CPU),
#                                                                 megatron-core 0.19.2
#
# The interpreter is python3.X on PATH, else pyenv's newest 3.X (pyenv ships 3.10-3.13 here).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY_VERSION="${PATCHPY_VERSION:-3.11}"
case "$PY_VERSION" in
  3.11) CONSTRAINTS="$ROOT/constraints/ci.txt";    DEFAULT_VENV="$ROOT/.venv" ;;
  3.12) CONSTRAINTS="$ROOT/constraints/py312.txt"; DEFAULT_VENV="$ROOT/.venv312" ;;
  *) echo "PATCHPY_VERSION=$PY_VERSION: expected 3.11 or 3.12" >&2; exit 2 ;;
esac
VENV="${PATCHLANE_VENV:-$DEFAULT_VENV}"
find_python() {
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
  if command -v "python$PY_VERSION" >/dev/null 2>&1 \
      && "python$PY_VERSION" -c 'import sys' >/dev/null 2>&1; then
    command -v "python$PY_VERSION"; return
  fi
  local root="${PYENV_ROOT:-$HOME/.pyenv}"
  local found
  found=$(ls -1d "$root"/versions/"$PY_VERSION".*/bin/python 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$found" ]; then echo "$found"; return; fi
  echo "no Python $PY_VERSION found (python$PY_VERSION on PATH or pyenv's $root/versions/$PY_VERSION.*)" >&2
  exit 1
}
PY="$(find_python)"
STAMP="$VENV/.patchlane-setup"
WANT="$(cat "$CONSTRAINTS" "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)"
if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating $VENV with $PY" >&2
  "$PY" -m venv "$VENV"
fi
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "== installing patchlane into $VENV from $(basename "$CONSTRAINTS") (Python $PY_VERSION)" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    -c "$CONSTRAINTS" torch -e "$ROOT[megatron,liger,dev]" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" >&2 || true
  "$VENV/bin/python" -c "import patchlane, torch, megatron.core" \
    || { echo "setup failed: see the pip output above" >&2; exit 1; }
  echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
cd "$ROOT"
