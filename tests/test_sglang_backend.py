"""gramc as SGLang's grammar backend, driven through SGLang's own classes.

Needs SGLang (skipped without it; ``tools/sglang_env.sh`` makes a virtualenv with SGLang
0.5.23 and runs this file). What runs is SGLang's code: its plugin loader finds gramc's
``sglang.srt.plugins`` entry point; its registry builds the backend; ``BaseGrammarBackend``
compiles each key in its thread pool and serves copies from its cache; its static
``fill_vocab_mask_batched`` and ``GrammarMask.apply`` fill and apply the rows. Each row is
compared with a gramc ``Matcher`` bound to the Llama 3 tokenizer with the model's EOS ids, on
random walks, with rollbacks. Not exercised: the scheduler, the server's argument parser,
and GPU logits.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from paths import shared_path

base = pytest.importorskip("sglang.srt.constrained.base_grammar_backend",
                           reason="SGLang is not installed (tools/sglang_env.sh sets it up)")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import gramc  # noqa: E402
from gramc.integrations.engine_grammars import request_source  # noqa: E402

HEAD = 128320
EOS, EOT = 128001, 128009
DATE = r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
          "additionalProperties": False}
EBNF = 'root ::= "[" (item ("," item)*)? "]"\nitem ::= [0-9]{1,3} | root'
LARK = 'start: "(" expr ")"\nexpr: NUMBER | expr "+" expr | start\nNUMBER: /[0-9]{1,2}/'
STAG = json.dumps({"type": "structural_tag", "triggers": ["<tool>"],
                   "structures": [{"begin": "<tool>", "schema": SCHEMA, "end": "</tool>"}]})
# SGLang key -> gramc request kind of the same constraint
KEYS = {
    ("json", json.dumps(SCHEMA)): ("JSON", json.dumps(SCHEMA)),
    ("json", "$$ANY$$"): ("JSON", "{}"),
    ("regex", DATE): ("REGEX", DATE),
    ("ebnf", EBNF): ("GRAMMAR", EBNF),
    ("ebnf", LARK): ("GRAMMAR", LARK),
    ("structural_tag", STAG): ("STRUCTURAL_TAG", STAG),
}


@pytest.fixture(scope="module")
def tokenizer():
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(shared_path("vocabs", "llama3-tokenizer.json")))
    tok.eos_token = "<|end_of_text|>"
    return tok


@pytest.fixture(scope="module")
def backend(tokenizer):
    from sglang.srt.plugins import load_plugins

    load_plugins()
    assert "gramc" in base.GRAMMAR_BACKEND_REGISTRY
    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES

    assert "gramc" in GRAMMAR_BACKEND_CHOICES
    mp = pytest.MonkeyPatch()
    mp.setenv("GRAMC_VLLM_LAZY", "1")  # bind states on first use: same masks, no minutes-long bind
    made = base.GRAMMAR_BACKEND_REGISTRY["gramc"](None, tokenizer, HEAD, {EOS, EOT})
    mp.undo()
    assert type(made).__name__ == "GramcSGLangBackend"
    return made


@pytest.fixture(scope="module")
def refs(tokenizer):
    return {"vocab": gramc.Vocab.from_hf(tokenizer, eos_ids=(EOS, EOT))}


def _reference(refs, key):
    fmt, source = request_source(*KEYS[key])
    if key not in refs:
        refs[key] = gramc.compile(source, format=fmt, vocab=refs["vocab"], lazy=True)
    return refs[key].matcher(max_rollback=64)


def _grammar(backend, key):
    value, hit = backend.get_cached_or_future_value(key, False)
    if not hit:
        value = value.result(timeout=600)
        backend.set_cache(key, value.copy())
    assert type(value).__name__ == "GramcSGLangGrammar", value
    return value


def _row(grammar, mask_rows=2, row=1):
    mask = grammar.allocate_vocab_mask(vocab_size=HEAD, batch_size=mask_rows, device="cpu")
    grammar.fill_vocab_mask_batched([base.GrammarRow(row=row, grammar=grammar)], mask)
    return grammar.move_vocab_mask(mask, "cpu")


def _allowed(words):
    return np.unpackbits(words.numpy().view(np.uint8), bitorder="little")[:HEAD].astype(bool)


@pytest.mark.parametrize("key", list(KEYS), ids=[f"{k}-{i}" for i, (k, _v) in enumerate(KEYS)])
def test_random_walks_match_gramc_masks(backend, refs, key):
    gen = torch.Generator().manual_seed(3)
    rng = np.random.default_rng(3)
    for _walk in range(2):
        grammar = _grammar(backend, key)  # the second walk gets a copy from SGLang's cache
        ref = _reference(refs, key)
        tokens: list[int] = []
        for _step in range(40):
            mask = _row(grammar)
            assert _allowed(mask[0]).all()  # the unlisted row stays unconstrained
            allowed = _allowed(mask[1])
            assert np.array_equal(allowed, ref.mask(HEAD)), np.flatnonzero(allowed != ref.mask(HEAD))[:5]
            logits = torch.randn(2, HEAD, generator=gen)
            logits[:, [EOS, EOT]] += 4.0
            base.GrammarMask(grammar, mask).apply(logits)
            assert torch.equal(torch.isfinite(logits[1]), torch.from_numpy(allowed))
            token = int(torch.multinomial(torch.softmax(logits[1], -1), 1, generator=gen))
            if tokens and rng.random() < 0.2:  # speculative verification rolls back
                k = int(rng.integers(1, len(tokens) + 1))
                grammar.rollback(k)
                ref.rollback(k)
                del tokens[-k:]
                continue
            grammar.accept_token(token)
            assert ref.commit_token(token)
            tokens.append(token)
            assert grammar.is_terminated() == (token in (EOS, EOT))
            if grammar.is_terminated():
                break
        text = b"".join(refs["vocab"].tokens[t] for t in tokens if t not in (EOS, EOT)).decode("utf-8", "replace")
        if key[0] == "regex" and grammar.is_terminated():
            assert re.fullmatch(DATE, text), text
        if key[0] == "json" and grammar.is_terminated():
            json.loads(text)


def test_refused_token_raises(backend, tokenizer):
    grammar = _grammar(backend, ("regex", DATE))
    with pytest.raises(ValueError, match="refused"):
        grammar.accept_token(tokenizer.encode("x", add_special_tokens=False)[0])


@pytest.mark.parametrize("key", [("regex", "(ab"), ("json", '{"type": 3}'), ("ebnf", 'root ::= "a" missing'),
                                 ("structural_tag", '{"type": "structural_tag", "format": {"type": "nope"}}')])
def test_invalid_constraints_are_invalid_grammar_objects(backend, key):
    value, hit = backend.get_cached_or_future_value(key, False)
    assert not hit and isinstance(value.result(timeout=600), base.InvalidGrammarObject)
