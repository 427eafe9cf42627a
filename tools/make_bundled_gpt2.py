#!/usr/bin/env python3
"""Regenerate src/gramc/vocab/data/gpt2.vocab.zst from the GPT-2 tiktoken rank file.

The source is ``shared/vocabs/gpt2.tiktoken`` beside the repository (openai-whisper 20250625,
``whisper/assets/gpt2.tiktoken``, MIT License). Its 50,256 ranks are token ids 0-50255; id
50256 is ``<|endoftext|>``, special and end-of-sequence. The output is byte-for-byte
reproducible: run it twice and compare, or run with ``--check`` (exit status 1 when the
committed file differs from what the source gives).

    python tools/make_bundled_gpt2.py [--source PATH] [--check]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO.parent / "shared" / "vocabs" / "gpt2.tiktoken"
TARGET = REPO / "src" / "gramc" / "vocab" / "data" / "gpt2.vocab.zst"
sys.path.insert(0, str(REPO / "src"))  # run from a checkout without installing

SOURCE_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"


def build(source: Path) -> bytes:
    """The bundle bytes for the GPT-2 rank file at ``source`` (checked against its sha256)."""
    from gramc.vocab.bundled import encode_bundle
    from gramc.vocab.tiktoken_file import load_tiktoken

    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    if digest != SOURCE_SHA256:
        raise SystemExit(f"{source}: sha256 {digest} is not the expected {SOURCE_SHA256}")
    vocab = load_tiktoken(source, {"<|endoftext|>": 50256}, eos=50256, name="gpt2")
    assert vocab.size == 50257 and vocab.special_ids == {50256}
    return encode_bundle(
        vocab,
        source="openai-whisper 20250625 (PyPI sdist), whisper/assets/gpt2.tiktoken",
        source_sha256=SOURCE_SHA256,
        license="MIT",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    blob = build(args.source)
    if args.check:
        same = TARGET.is_file() and TARGET.read_bytes() == blob
        print(f"{TARGET.relative_to(REPO)}: {'up to date' if same else 'DIFFERS from the source'}")
        return 0 if same else 1
    TARGET.write_bytes(blob)
    digest = hashlib.sha256(blob).hexdigest()
    print(f"wrote {TARGET.relative_to(REPO)}: {len(blob):,} bytes, sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
