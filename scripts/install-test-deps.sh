#!/bin/sh
# Install the system packages the test suite needs, if they are missing (the Python training
# stack is scripts/install-train-deps.sh):
#   bubblewrap  the sandbox of the agent tools (sql and python); util-linux `unshare` is the
#               fallback, but the security tests exercise both
#   chromium    renders the evaluation report in tests/eval/test_eval_report.py
# Quiet and quick when both are installed; otherwise installs them with the system's package
# manager (apt-get, after `apt-get update`; dnf), as root directly or through sudo.
# Usage: sh scripts/install-test-deps.sh   (the README's test command runs it; so does .ci/run)
set -eu

missing=""
command -v bwrap >/dev/null 2>&1 || missing="$missing bubblewrap"
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  missing="$missing chromium"
fi
[ -z "$missing" ] && exit 0
missing=${missing# }

if [ "$(id -u)" -eq 0 ]; then
  as_root=""
elif command -v sudo >/dev/null 2>&1; then
  as_root="sudo"
else
  echo "install-test-deps: the tests need: $missing. Install them as root (e.g. apt-get install -y $missing) and run the tests again." >&2
  exit 1
fi

echo "install-test-deps: installing $missing (needed by the tests)" >&2
if command -v apt-get >/dev/null 2>&1; then
  # A fresh machine (or container) has no package lists yet: update first.
  $as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
elif command -v dnf >/dev/null 2>&1; then
  $as_root dnf install -y -q $missing
else
  echo "install-test-deps: no apt-get or dnf here; install these packages by hand: $missing" >&2
  exit 1
fi

for tool in bwrap chromium; do
  case $tool in
    bwrap) command -v bwrap >/dev/null 2>&1 && continue ;;
    chromium) { command -v chromium || command -v chromium-browser; } >/dev/null 2>&1 && continue ;;
  esac
  echo "install-test-deps: $tool is still not on PATH after installing $missing" >&2
  exit 1
done
