#!/usr/bin/env bash
# Hybrid search over 50,000 chunks, Groundwork against haiku.rag 0.77 and both against the
# engine's floor, measured side by side in one run, on the same database and embedder.
#
#   bash benches/compare_search.sh
#
# 1. starts the hashembed-64 embeddings server (tests/fixtures/haiku/hashembed.py, standard
#    library only) on 127.0.0.1 in a process of its own;
# 2. `cargo bench --bench search` (release) with GROUNDWORK_BENCH_EMBED_URL pointing at it:
#    builds the 50,000-chunk database once (cached under $CARGO_TARGET_DIR/bench-data), then
#    p50 of the floor (LanceDB's vector query after the query embedding, concurrently with
#    its full-text query) and of `Store::search`, 2 x 200 queries interleaved;
# 3. benches/haiku_search.py in the pinned haiku.rag venv (tests/fixtures/haiku/venv.sh,
#    created if missing): `HaikuRAG.search(q, limit=5)` on the same database (read-only),
#    same queries, same server, and the Python LanceDB's floor the same way;
# 4. prints the p50s and the ratios.
#
# Environment: CARGO_TARGET_DIR (a release build: about an hour cold on two cores; use a
# directory of its own), BENCH_EMBED_PORT (default 47812).
set -euo pipefail
cd "$(dirname "$0")/.."

port="${BENCH_EMBED_PORT:-47812}"
url="http://127.0.0.1:$port/v1"
target="${CARGO_TARGET_DIR:-target}"
db="$target/bench-data/search-50000.lancedb"
py="$(bash tests/fixtures/haiku/venv.sh)"

bench_out="$(mktemp)"
haiku_out="$(mktemp)"
"$py" tests/fixtures/haiku/hashembed.py "$port" >/dev/null &
server=$!
trap 'kill "$server" 2>/dev/null; rm -f "$bench_out" "$haiku_out"' EXIT
up=0
for _ in $(seq 50); do
    if "$py" -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null; then
        up=1
        break
    fi
    sleep 0.1
done
if [[ $up == 0 ]] || ! kill -0 "$server" 2>/dev/null; then
    echo "error: the hashembed server did not start on 127.0.0.1:$port (set BENCH_EMBED_PORT)" >&2
    exit 1
fi

echo "Groundwork: cargo bench --bench search ..." >&2
GROUNDWORK_BENCH_EMBED_URL="$url" cargo bench --bench search | tee "$bench_out" >&2

echo "haiku.rag 0.77: HaikuRAG.search on $db ..." >&2
# LANCEDB_LOG=error: the Python LanceDB logs a deprecation warning per floor query otherwise.
LANCEDB_LOG=error PYTHONDONTWRITEBYTECODE=1 "$py" benches/haiku_search.py "$db" "$url" "$haiku_out"

python3 - "$bench_out" "$haiku_out" <<'EOF'
import json, re, sys

text = open(sys.argv[1], encoding="utf-8").read()
def p50(prefix):
    m = re.search(rf"^{prefix}.*?p50 ([0-9.]+) ms", text, re.M)
    if not m:
        sys.exit(f"no '{prefix}' line in the bench output")
    return float(m.group(1))
floor, gw = p50("floor"), p50("hybrid search")
h = json.load(open(sys.argv[2]))
m = re.search(r'^first query: "(.*)"$', text, re.M)
if not m or m.group(1) != h["first_query"]:
    sys.exit(f"the two runs did not use the same queries: {m and m.group(1)!r} vs {h['first_query']!r}")
hs, hf = h["search"]["p50"], h["floor"]["p50"]
print(f"hybrid search, 50,000 chunks, limit 5, p50 over {h['queries']} queries (same database, same embeddings server):")
print(f"  floor, Rust LanceDB (vector + full-text concurrently, query embedded):  {floor:6.2f} ms")
print(f"  Groundwork Store::search:                                              {gw:6.2f} ms  {gw / floor:.2f}x the floor")
print(f"  floor, Python LanceDB as haiku.rag uses it:                            {hf:6.2f} ms")
print(f"  haiku.rag 0.77 HaikuRAG.search:                                        {hs:6.2f} ms  {hs / floor:.2f}x the Rust floor, {hs / hf:.2f}x its own")
print(f"  haiku.rag / Groundwork: {hs / gw:.2f}x")
EOF
