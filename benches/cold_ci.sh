#!/usr/bin/env bash
# The README's two commands on a cold machine, timed: a fresh clone of this repository and an
# empty HOME (no cargo registry, no target dir, no Python venvs, no llama-server), only the
# Rust toolchain kept (RUSTUP_HOME) and the Debian packages as installed. In order:
#   .ci/setup; cargo build                  (the first command's build)
#   cargo run in tmux, to the first frame   (first start: embedding model, demo database)
#   cargo test --no-run                     (must compile no dependency again)
#   .ci/setup-tests; CI=true cargo test     (the rest of a cold CI run)
# Each step's wall time goes to $SCRATCH/times.log, its output beside it. Run it on an
# otherwise idle machine; it takes about an hour on two cores and ~10 GB of disk.
#
#   bash benches/cold_ci.sh [SCRATCH]        (default /tmp/groundwork-cold; emptied first)
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
scratch="${1:-/tmp/groundwork-cold}"
rm -rf "$scratch" && mkdir -p "$scratch/home"
export RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}"
export HOME="$scratch/home" CARGO_TERM_COLOR=never
export CARGO_TARGET_DIR="$HOME/.cache/groundwork-target"
log="$scratch/times.log"
t0=$(date +%s)
mark() { printf '%-34s %6ds\n' "$1" "$(($(date +%s) - t0))" | tee -a "$log"; }
git clone -q "$repo" "$scratch/src" && cd "$scratch/src" || exit 1
git log --oneline -1 | tee "$log"
t0=$(date +%s)
bash .ci/setup >"$scratch/setup.log" 2>&1 || exit 1
mark ".ci/setup"
/usr/bin/time -v cargo build >"$scratch/build.log" 2>&1 || exit 1
mark "cargo build"
tmux -L groundwork-cold kill-server 2>/dev/null
tmux -L groundwork-cold new-session -d -x 160 -y 48 "cargo run 2>$scratch/first-start.log"
for _ in $(seq 1 1200); do
  tmux -L groundwork-cold capture-pane -p 2>/dev/null | grep -q "SCRIPTED DEMO" && break
  sleep 0.5
done
mark "first frame of cargo run"
tmux -L groundwork-cold capture-pane -p >"$scratch/first-frame.txt"
tmux -L groundwork-cold send-keys C-q
sleep 2
tmux -L groundwork-cold kill-server 2>/dev/null
/usr/bin/time -v cargo test --no-run >"$scratch/testbuild.log" 2>&1 || exit 1
mark "cargo test --no-run"
echo "compiled for the tests: $(grep Compiling "$scratch/testbuild.log" | awk '{print $2}' | tr '\n' ' ')" | tee -a "$log"
bash .ci/setup-tests >"$scratch/setup-tests.log" 2>&1 || exit 1
mark ".ci/setup-tests"
CI=true cargo test >"$scratch/suite.log" 2>&1
rc=$?
mark "cargo test (rc=$rc)"
du -sh "$CARGO_TARGET_DIR" | tee -a "$log"
exit $rc
