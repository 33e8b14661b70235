#!/bin/sh
# The agent tools as an unprivileged user (issue 25, item 5): the security suite and the rollouts
# bench, run the way a cluster that trains as a normal user runs them (the fork server in an
# unprivileged user namespace; docs/tools.md).
#
# As root (CI): creates the user causaltrace-ci if it is missing, and a venv for it outside any
# home (/opt/causaltrace-nonroot/venv: an interpreter under a 0700 home, such as pyenv's under
# /root, is unreadable by another user), on the first Python 3.11+ that user can run; installs
# the package (editable) with pytest there; then runs, as that user:
#   pytest tests/tools/test_tools_security.py tests/tools/test_sandbox_isolation.py tests/tools/test_tools_fork_server.py
#   python bench/bench_rollouts.py --quick
# As a normal user: runs the same with the current python3.
# Usage: sh scripts/nonroot-check.sh [--no-bench] [extra pytest arguments]
#   CAUSALTRACE_NONROOT_USER  the user to run as (default causaltrace-ci)
#   CAUSALTRACE_NONROOT_DIR   where the venv and the user's scratch space go
#                             (default /opt/causaltrace-nonroot)
#   CAUSALTRACE_NONROOT_DATASET  the bench's dataset (default data/ads_test)
#   CAUSALTRACE_NONROOT_TESTS    the test files (or node ids) to run (default the three above;
#                                .ci/run names the attack suite and issue 42's finding tests)
set -eu
cd "$(dirname "$0")/.."

bench=1
if [ "${1:-}" = "--no-bench" ]; then
  bench=0
  shift
fi
tests=${CAUSALTRACE_NONROOT_TESTS:-"tests/tools/test_tools_security.py tests/tools/test_sandbox_isolation.py tests/tools/test_tools_fork_server.py"}
dataset=${CAUSALTRACE_NONROOT_DATASET:-data/ads_test}

if [ "$(id -u)" -ne 0 ]; then
  echo "nonroot-check: running as $(id -un) (uid $(id -u)) with $(command -v python3)" >&2
  # shellcheck disable=SC2086  # the test files are separate words
  python3 -m pytest -q -p no:cacheprovider $tests "$@"
  [ "$bench" -eq 1 ] && python3 bench/bench_rollouts.py --quick --dataset "$dataset"
  exit 0
fi

user=${CAUSALTRACE_NONROOT_USER:-causaltrace-ci}
top=${CAUSALTRACE_NONROOT_DIR:-/opt/causaltrace-nonroot}
umask 022

if ! id -u "$user" >/dev/null 2>&1; then
  echo "nonroot-check: creating the user $user" >&2
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user"
fi
uid=$(id -u "$user")
gid=$(id -g "$user")
as_user() {
  setpriv --reuid="$uid" --regid="$gid" --clear-groups \
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$top/home" TMPDIR=/tmp LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 "$@"
}

# The base interpreter: the real executable behind python3 (a pyenv shim, a venv), else the
# system's, whichever the user can run with its standard library.
base=""
for candidate in python3 /usr/bin/python3 /usr/local/bin/python3; do
  command -v "$candidate" >/dev/null 2>&1 || continue
  real=$("$candidate" -c 'import sys; print(sys._base_executable)' 2>/dev/null) || continue
  if as_user "$real" -c 'import sys, venv, ensurepip; assert sys.version_info >= (3, 11)' \
    >/dev/null 2>&1; then
    base=$real
    break
  fi
done
if [ -z "$base" ]; then
  echo "nonroot-check: no Python >= 3.11 with venv that $user can run (install python3-venv)" >&2
  exit 1
fi

mkdir -p "$top"
chmod 755 "$top"
mkdir -p "$top/home"
chown "$uid:$gid" "$top/home"
# The repository must be readable by the user too: if it is not (a clone under /root), copy it.
src=$(pwd)
if ! as_user test -r "$src/pyproject.toml"; then
  echo "nonroot-check: $src is not readable by $user; copying it to $top/src" >&2
  rm -rf "$top/src"
  mkdir -p "$top/src"
  tar --exclude=./.git -cf - . | tar -xf - -C "$top/src"
  src=$top/src
fi
venv=$top/venv
if [ ! -x "$venv/bin/python" ] || ! as_user "$venv/bin/python" -c 'import sys' 2>/dev/null; then
  rm -rf "$venv"
  "$base" -m venv "$venv"
fi
echo "nonroot-check: installing the package into $venv (as root; read-only for $user)" >&2
"$venv/bin/python" -m pip install -q -e "$src" pytest pytest-timeout

cd "$src"
echo "nonroot-check: running as $user (uid $uid) with $venv/bin/python" >&2
# shellcheck disable=SC2086
as_user "$venv/bin/python" -m pytest -q -p no:cacheprovider $tests "$@"
if [ "$bench" -eq 1 ]; then
  as_user "$venv/bin/python" bench/bench_rollouts.py --quick --dataset "$dataset"
fi
