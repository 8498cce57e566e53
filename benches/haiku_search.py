"""haiku.rag 0.77's hybrid search on the database `cargo bench --bench search` built.

    python benches/haiku_search.py DB_PATH EMBED_URL RESULTS_JSON

Run by benches/compare_search.sh with the pinned haiku.rag venv (tests/fixtures/haiku).
Opens DB_PATH read-only with the hashembed-64 embedder at EMBED_URL (an OpenAI-compatible
/v1 endpoint: tests/fixtures/haiku/hashembed.py, the server the Groundwork run uses too)
and times, over the same 200 queries as benches/search.rs (two passes, interleaved query by
query, the second pass reported):

- `HaikuRAG.search(query, limit=5)`: haiku.rag's hybrid search as its users call it;
- its engine's floor: the query embedded by haiku.rag's embedder, then the Python LanceDB's
  vector query, concurrently with its full-text query, on the chunks table, the same
  columns and limit as the Rust floor.

Writes {"search": {...}, "floor": {...}} with p50/p95 in ms to RESULTS_JSON.
"""

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time

os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")
# The OpenAI provider insists on a key; the local server ignores it.
os.environ.setdefault("OPENAI_API_KEY", "bench-not-a-secret")

from haiku.rag.client import HaikuRAG  # noqa: E402
from haiku.rag.config import AppConfig  # noqa: E402

# benches/search.rs's vocabulary and generator, value for value.
WORDS = [
    "solar", "panel", "inverter", "battery", "charge", "voltage", "current", "roof", "angle",
    "shade", "cable", "fuse", "meter", "grid", "export", "import", "winter", "summer", "clean",
    "glass", "frame", "mount", "bolt", "wind", "snow", "rain", "heat", "cell", "module", "string",
    "diode", "bypass", "tilt", "azimuth", "yield", "kilowatt", "hour", "storage", "lithium",
    "cycle", "warranty", "install", "inspect", "repair", "safety", "earth", "breaker", "display",
    "monitor", "log", "fault", "alarm", "reset", "firmware", "update", "network", "sensor",
]
MASK = (1 << 64) - 1
A, C = 6364136223846793005, 1442695040888963407
COLUMNS = ["id", "document_id", "content", "content_fts", "metadata", "order"]
LIMIT = 5


def text(seed: int, words: int) -> str:
    x = (seed * A + C) & MASK
    out = []
    for _ in range(words):
        x = (x * A + C) & MASK
        out.append(WORDS[(x >> 33) % len(WORDS)])
    return " ".join(out)


def percentile(sorted_ms: list[float], p: float) -> float:
    return sorted_ms[round((len(sorted_ms) - 1) * p)]


async def main(db_path: str, embed_url: str, results: str) -> None:
    data_dir = tempfile.mkdtemp(prefix="haiku-search-bench-")
    config = AppConfig.model_validate(
        {
            "storage": {"data_dir": data_dir},
            "embeddings": {
                "model": {
                    "provider": "openai",
                    "name": "hashembed-64",
                    "vector_dim": 64,
                    "base_url": embed_url,
                }
            },
        }
    )
    queries = [text(1_000_000 + i, 4) for i in range(200)]
    async with HaikuRAG(db_path, config=config, read_only=True) as rag:
        table = rag.store.chunks_table
        refine = config.search.vector_refine_factor

        async def floor(q: str) -> int:
            async def vector():
                emb = await rag.embedder.embed_query(q)
                return await (
                    table.query()
                    .nearest_to(emb)
                    .column("vector")
                    .refine_factor(refine)
                    .select(COLUMNS)
                    .limit(LIMIT)
                    .to_arrow()
                )

            fts = (
                table.query()
                .nearest_to_text(q, columns="content_fts")
                .select(COLUMNS)
                .limit(LIMIT)
                .to_arrow()
            )
            v, f = await asyncio.gather(vector(), fts)
            return v.num_rows + f.num_rows

        async def timed(f) -> float:
            t = time.perf_counter()
            n = await f
            e = (time.perf_counter() - t) * 1e3
            if not n:
                sys.exit("haiku.rag found nothing for a benchmark query")
            return e

        async def search(q: str) -> int:
            return len(await rag.search(q, limit=LIMIT))

        floor_ms, search_ms, first_ms = [], [], []
        for p in range(2):
            for n, q in enumerate(queries):
                floor_first = (n + p) % 2 == 0
                if floor_first:
                    f = await timed(floor(q))
                    if p == 1:
                        floor_ms.append(f)
                e = await timed(search(q))
                (first_ms if p == 0 else search_ms).append(e)
                if not floor_first:
                    f = await timed(floor(q))
                    if p == 1:
                        floor_ms.append(f)
    for v in (floor_ms, search_ms, first_ms):
        v.sort()
    out = {
        "queries": len(search_ms),
        "first_query": queries[0],
        "search": {"p50": percentile(search_ms, 0.5), "p95": percentile(search_ms, 0.95)},
        "search_first_pass": {"p50": percentile(first_ms, 0.5)},
        "floor": {"p50": percentile(floor_ms, 0.5), "p95": percentile(floor_ms, 0.95)},
    }
    with open(results, "w") as f:
        json.dump(out, f, indent=1)
    shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
