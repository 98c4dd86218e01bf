# Sourced by scripts/test (at set-up) and scripts/_test_interpreter:
# tests/evidence/test_report_browser.py loads the sweep's report.html in headless Chromium.
# Where no Chromium is on PATH and apt-get is usable (as root, or through passwordless sudo),
# Debian's `chromium` package is installed; where one is present nothing happens, so running it
# again costs one `command -v`. It never fails the set-up: without Chromium the browser test
# skips and says why.
#   PATCHLANE_CHROMIUM=/path/to/chrome   use that browser (nothing is installed)
#   PATCHLANE_INSTALL_CHROMIUM=0         never install
ensure_chromium() {
  local name
  if [ -n "${PATCHLANE_CHROMIUM:-}" ]; then return 0; fi
  for name in chromium chromium-browser google-chrome google-chrome-stable; do
    command -v "$name" >/dev/null 2>&1 && return 0
  done
  [ "${PATCHLANE_INSTALL_CHROMIUM:-1}" = "1" ] || return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "== no chromium and no apt-get: the report's browser test will skip" >&2
    return 0
  fi
  local sudo=()
  if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      sudo=(sudo -n)
    else
      echo "== no chromium, and apt-get needs root (no passwordless sudo): the report's" \
           "browser test will skip; install it with: sudo apt-get install -y chromium" >&2
      return 0
    fi
  fi
  echo "== installing chromium with apt-get (for the report's browser test)" >&2
  local install=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium)
  # Try with the package lists as they are first; a fresh container has none, so update then.
  if ! ${sudo[@]+"${sudo[@]}"} "${install[@]}" >&2 2>/dev/null; then
    if ! { ${sudo[@]+"${sudo[@]}"} apt-get update -q >&2 \
           && ${sudo[@]+"${sudo[@]}"} "${install[@]}" >&2; }; then
      echo "== apt-get could not install chromium: the report's browser test will skip" >&2
    fi
  fi
  return 0
}
ensure_chromium
