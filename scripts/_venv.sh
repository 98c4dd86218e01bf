# Sourced by scripts/test, sweep, matrix, merge, nightly, radar, example: one virtual environment
# per Python interpreter, built from the repo's own pins, so a fresh machine needs nothing installed
# by hand.
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
# pip, quietly: its warnings about this workplace's configured index folders that are not there
# are dropped; its exit status is not looked at (the import check below says whether it worked).
pip_install() {
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" >&2 || true
}
# uv installs what pip would, from the same pins, in about half the time on CI's 2 CPUs (each
# venv from nothing, checked: 3.11 in 28 s against 51, 3.12 in 45 s against 77; it downloads,
# unpacks and compiles in parallel where pip does one file at a time), with the package sources
# pip is configured with (scripts/_uv_install.py). It lives beside the venv, not in it, so the
# venv holds what it did; its pin is constraints/uv.txt, apart from the venv's pins, so adopting
# or bumping it rebuilds no venv. Where uv cannot be had or fails, pip installs it as before.
install_with_uv() {
  pip_install --upgrade --target "$VENV/.setup-uv" -r "$ROOT/constraints/uv.txt"
  [ -x "$VENV/.setup-uv/bin/uv" ] || return 1
  # uv's cache is this install's own, beside the venv, and removed when the install ends. The
  # venv's files are hard links into it, so once it is gone each file is the venv's alone, as
  # pip's are (a test edits an installed file to see doctor catch it), and the 3.12 venv's CUDA
  # build of torch lies on disk once: a copy beside the user's shared uv cache kept 6.2 GB of
  # downloads next to the venv's 4.9 GB for good, and the suite's own release installs (torch
  # 2.15.0's CUDA build, 5.3 GB) then ran out of room on a CI machine. The price: a venv rebuilt
  # (its pins or pyproject.toml changed) downloads its wheels again; one stopped half-way leaves
  # the cache until the next install removes it, first thing.
  local cache="$VENV/.setup-uv-cache" rc=0
  rm -rf "$cache"
  "$VENV/bin/python" "$ROOT/scripts/_uv_install.py" "$VENV/.setup-uv/bin/uv" --quiet \
      --native-tls --cache-dir "$cache" --link-mode hardlink --compile-bytecode \
      -c "$CONSTRAINTS" torch -e "$ROOT[megatron,liger,dev]" >&2 || rc=$?
  rm -rf "$cache"
  return "$rc"
}
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "== installing patchlane into $VENV from $(basename "$CONSTRAINTS") (Python $PY_VERSION)" >&2
  if ! install_with_uv; then
    echo "== uv could not install it (see above): pip installs it instead" >&2
    # --no-cache-dir, as uv's cache is removed: pip's would keep the CUDA build's wheels for good
    pip_install --no-cache-dir -c "$CONSTRAINTS" torch -e "$ROOT[megatron,liger,dev]"
  fi
  "$VENV/bin/python" -c "import patchlane, torch, megatron.core" \
    || { echo "setup failed: see the install's output above" >&2; exit 1; }
  echo "$WANT" > "$STAMP"
fi
# patchlane's own modules, compiled for this interpreter when they changed: where
# PYTHONDONTWRITEBYTECODE is set (CI images and many containers set it) Python writes no
# bytecode on import, so each of the thousands of interpreters a sweep or the suite starts
# compiled the patchlane modules it imports afresh (40-100 ms each; the CPU time of the suite's
# CLI and proof tests fell 12% with them compiled). `checked-hash`, as a release cache's installs
# are compiled: Python uses a .pyc only while it matches its source's hash, so an edited file is
# never run stale, whatever its timestamp. (Overlays and reproducers are compiled from their
# bytes by patchlane itself, and pytest rewrites the tests: a .pyc of theirs would go unused.)
COMPILED="$VENV/.patchlane-compiled"
SOURCES=("$ROOT/patchlane" "$ROOT/examples")
if [ ! -e "$COMPILED" ] \
    || [ -n "$(find "${SOURCES[@]}" -name '*.py' -newer "$COMPILED" -print -quit)" ]; then
  touch "$COMPILED.next"
  if "$VENV/bin/python" -m compileall -q -j 0 --invalidation-mode checked-hash \
      "${SOURCES[@]}" > /dev/null; then
    mv "$COMPILED.next" "$COMPILED"
  fi
fi
export PATH="$VENV/bin:$PATH"
cd "$ROOT"
