#!/usr/bin/env bash
# Evidence compaction per model request, Groundwork against haiku.rag 0.77, measured side by
# side on this machine, on the same input: the 50-question conversation with 200 cited chunks
# recorded by haiku.rag (tests/fixtures/compaction_bench/session.json).
#
#   bash benches/compare_compaction.sh
#
# haiku.rag: tests/fixtures/compaction_bench/make_bench.sh with BENCH_SKIP_RECORD=1 (the
# pinned venv of tests/fixtures/haiku, created if missing), median of 2,000 calls of
# EvidenceCompactionCapability.wrap_model_request. Groundwork: `cargo bench --bench
# compaction` (release), criterion's median estimate. Prints one line per Groundwork figure
# with its ratio to haiku.rag's median. haiku.rag rebuilds the capsule on every request, so
# its figure is the same for the first and the later requests of a question.
#
# Environment: CARGO_TARGET_DIR (a release build of the bench: about an hour cold on two
# cores; use a directory of its own), BENCH_REPEAT (haiku.rag repetitions, default 2000).
set -euo pipefail
cd "$(dirname "$0")/.."

results="$(mktemp)"
bench_out="$(mktemp)"
trap 'rm -f "$results" "$bench_out"' EXIT

echo "haiku.rag 0.77: timing wrap_model_request ..." >&2
BENCH_SKIP_RECORD=1 BENCH_RESULTS="$results" bash tests/fixtures/compaction_bench/make_bench.sh >&2

echo "Groundwork: cargo bench --bench compaction ..." >&2
cargo bench --bench compaction >"$bench_out"

python3 - "$results" "$bench_out" <<'EOF'
import json, re, sys

haiku = json.load(open(sys.argv[1]))["timings"]["wrap_model_request"]["median_us"]
units = {"ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}
name = None
rows = []
for line in open(sys.argv[2], encoding="utf-8"):
    m = re.match(r"^(.*?)\s*time:\s*\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", line)
    if m:
        label = m.group(1).strip() or name
        if label:
            rows.append((label, float(m.group(2)) * units[m.group(3)]))
        name = None
    elif line.strip() and not line[0].isspace():
        name = line.strip()
if not rows:
    sys.exit("no criterion figures in the bench output")
print(f"haiku.rag 0.77 wrap_model_request, median: {haiku:.1f} µs")
for name, us in rows:
    print(f"{us:9.2f} µs  {haiku / us:7.1f}× faster  {name}")
EOF
