"""Wrong arguments to the public runtime calls get a clear TypeError/ValueError that names
what was expected, never a raw error from deep inside and never a silently wrong answer
(``bytes(5)`` is five zero bytes; a short mask drops allowed ids)."""

from __future__ import annotations

import numpy as np
import pytest

import gramc

VOCAB = gramc.Vocab.from_list(["(", ")", "x", "()", "<eos>"], special_ids=[4], eos_ids=[4])
ARTIFACTS = {
    "dfa": lambda: gramc.compile(r"\(x\)", vocab=VOCAB),
    "pda": lambda: gramc.compile('root ::= "(" root ")" | "x"', format="gbnf", vocab=VOCAB),
}


@pytest.fixture(params=sorted(ARTIFACTS))
def matcher(request):
    return ARTIFACTS[request.param]().matcher()


@pytest.mark.parametrize("call, error, message", [
    (lambda m: m.mask(size=3), ValueError, "mask size 3 is smaller than the vocabulary \\(5 ids\\)"),
    (lambda m: m.mask(size=-1), ValueError, "smaller than the vocabulary"),
    (lambda m: m.mask(size="9"), TypeError, "mask size is an int, got '9'"),
    (lambda m: m.commit_token(None), TypeError, "a token id is an int, got None"),
    (lambda m: m.commit_token("0"), TypeError, "a token id is an int, got '0'"),
    (lambda m: m.commit_token(0.0), TypeError, "a token id is an int"),
    (lambda m: m.commit_tokens([None]), TypeError, "a token id is an int, got None"),
    (lambda m: m.validate_tokens([None]), TypeError, "a token id is an int"),
    (lambda m: m.commit_bytes("("), TypeError, "commit_bytes takes bytes \\(encode text first\\), got str"),
    (lambda m: m.commit_bytes(3), TypeError, "got int"),
    (lambda m: m.fill_bitmask([0]), TypeError, "need a numpy int32/uint32 array of at least 1 words, got list"),
    (lambda m: m.fill_bitmask(np.zeros(1, np.float32)), ValueError, "int32/uint32"),
    (lambda m: m.fill_bitmask(np.zeros(0, np.int32)), ValueError, "at least 1 words"),
    # a size no vocabulary has: it allocated a terabyte (MemoryError)
    (lambda m: m.mask(size=2**40), ValueError, "mask size 1099511627776 is larger than any vocabulary"),
    (lambda m: m.logits_mask(2**63), ValueError, "mask size 9223372036854775808 is larger"),
    (lambda m: m.commit_tokens(None), TypeError, "token ids are an iterable of ints, got NoneType"),
    (lambda m: m.commit_tokens(5), TypeError, "token ids are an iterable of ints, got int"),
    (lambda m: m.validate_tokens("()"), TypeError, "token ids are an iterable of ints, got str"),
    (lambda m: m.rollback("1"), TypeError, "rollback takes a number of steps \\(an int\\), got '1'"),
])
def test_bad_arguments_are_clear_errors_and_change_nothing(matcher, call, error, message):
    before = matcher.mask().copy()
    with pytest.raises(error, match=message):
        call(matcher)
    assert (matcher.mask() == before).all()
    assert matcher.commit_tokens([0, 2]) == 2  # still at the start: "(" then "x"


def test_good_arguments_of_other_int_types(matcher):
    assert matcher.mask(size=np.int64(8)).shape == (8,)
    assert matcher.commit_token(np.int32(0)) and matcher.commit_bytes(bytearray(b"x"))
    assert matcher.commit_bytes(memoryview(b")")) and matcher.is_complete()


@pytest.mark.parametrize("source", [b"abc", None, 5])
def test_compile_takes_text(source):
    with pytest.raises(TypeError, match="source is text"):
        gramc.compile(source, vocab=None)


@pytest.mark.parametrize("data", ["GMSK", None, 5])
def test_from_bytes_takes_bytes(data):
    with pytest.raises(TypeError, match="from_bytes takes bytes"):
        gramc.from_bytes(data)


def test_compile_takes_limits():
    with pytest.raises(TypeError, match="limits is a gramc.limits.Limits, got str"):
        gramc.compile("a", limits="x")


@pytest.mark.parametrize("tokens", [None, 5, "abc"])
def test_a_vocabulary_is_a_list_of_tokens(tokens):
    with pytest.raises(TypeError, match="tokens are a list of bytes, str or None by id"):
        gramc.Vocab.from_list(tokens)
