"""sentence-transformers (torch, CPU) over the texts Groundwork embeds, for
benches/embed_compare.rs.

    python st_encode.py MODEL_DIR TEXTS_JSON BATCH THREADS

Loads all-MiniLM-L6-v2 from MODEL_DIR (the files Groundwork's local embedder reads),
limits torch to THREADS threads, encodes one batch to warm up, then times encoding every
text of TEXTS_JSON at BATCH texts a batch, normalised as Groundwork's vectors are. Prints,
as its last line, JSON: {"seconds", "texts", "per_s", "torch", "first": first 5 vectors}.
"""

import json
import sys
import time

import sentence_transformers
import torch


def main(model_dir: str, texts_path: str, batch: int, threads: int) -> None:
    torch.set_num_threads(threads)
    with open(texts_path) as f:
        texts = json.load(f)
    model = sentence_transformers.SentenceTransformer(model_dir, device="cpu")
    model.encode(texts[:batch], batch_size=batch)
    started = time.perf_counter()
    vectors = model.encode(texts, batch_size=batch, normalize_embeddings=True)
    seconds = time.perf_counter() - started
    print(
        json.dumps(
            {
                "seconds": seconds,
                "texts": len(texts),
                "per_s": len(texts) / seconds,
                "torch": torch.__version__,
                "first": vectors[:5].tolist(),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
