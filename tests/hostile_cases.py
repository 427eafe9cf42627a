"""Hostile inputs to gramc, each run in a child process under a wall-time and memory cap.

One list of cases (:data:`CASES`) serves the test (``tests/test_hostile_inputs.py``) and the
table of ``bench/hostile.py``. A case builds its input and calls gramc in the child; it is
*clean* when the child ends within the caps and either

* succeeds with the right answer (strings in and out of the compiled language, the masks of
  an artifact), or
* raises the expected documented error (a :mod:`gramc.errors` class; ``TypeError`` or
  ``ValueError`` for a wrong argument to a runtime call, ``OSError`` for a file that cannot
  be read) whose message matches the case's pattern (what was wrong, and where), raised by
  gramc's own code, not from inside numpy, msgpack or zstandard.

The families: deep nesting, long rule chains, recursive cycles, huge repetition counts,
wide alternations, big enums (compile); ``.gmask`` files with each declared size or index
pushed to an extreme and re-signed, decompression bombs, hostile msgpack (load); wrong
types and extreme values into the public runtime calls (call). The child's peak RSS comes
from ``wait4``; its address space is capped with ``RLIMIT_AS``, so an allocation past the
cap is a ``MemoryError`` (not clean), never a machine out of memory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
GiB = 1 << 30
#: The caps of a case unless it names smaller ones (issue 18: 60 s, 2 GiB).
WALL_SECONDS = 60
MEMORY_BYTES = 2 * GiB


@dataclass(frozen=True)
class Case:
    """One hostile input: ``run`` (called in the child) builds it and calls gramc.

    ``expect`` is what a clean end looks like: ``ok`` (``run``'s return value, compared
    with ``==``), and/or ``error`` (an exception class name; a subclass also passes) with
    ``match`` (a regular expression the message must contain). Both given: either passes.
    """

    name: str
    family: str
    run: Callable[[], Any]
    ok: Any = None
    error: str | None = None
    match: str = ""
    slow: bool = False
    memory: int = MEMORY_BYTES
    wall: float = WALL_SECONDS
    xfail: str = ""  # a known bug in a file this branch may not change: the reason


@dataclass
class Result:
    """How one case ended in its child."""

    case: str
    clean: bool
    why: str
    wall: float
    max_rss: int  # bytes
    outcome: dict = field(default_factory=dict)


CASES: list[Case] = []


def case(family: str, name: str, *, ok: Any = None, error: str | None = None, match: str = "",
         slow: bool = False, memory: int = MEMORY_BYTES, wall: float = WALL_SECONDS, xfail: str = "") -> Callable:
    """Register the decorated function as a case."""
    def register(fn: Callable[[], Any]) -> Callable[[], Any]:
        CASES.append(Case(f"{family}/{name}", family, fn, ok, error, match, slow, memory, wall, xfail))
        return fn
    return register


def by_name() -> dict[str, Case]:
    return {c.name: c for c in CASES + CAP_CHECKS}


def _spin() -> None:
    while True:
        pass


#: Cases that must *not* end clean, to check the caps themselves (not in the table).
CAP_CHECKS: list[Case] = [
    Case("caps/spin", "caps", _spin, ok="never", wall=3),
    Case("caps/hog", "caps", lambda: bytearray(4 * GiB), ok="never", memory=512 << 20),
]


# =========================================================================== helpers (child side)


def tiny_vocab():
    import gramc

    return gramc.Vocab.from_list(["(", ")", "x", "()", "a", "b", "z", "ab", "<eos>"], special_ids=[8], eos_ids=[8],
                                 name="hostile")


def language(source: str, fmt: str, strings: Iterable[str], **kwargs) -> list[bool]:
    """Compile ``source`` unbound; which of ``strings`` the compiled automaton accepts."""
    import gramc
    from gramc.runtime.check import check_artifact

    art = gramc.compile(source, fmt, **kwargs)
    return [check_artifact(art, s.encode()).ok for s in strings]


def compiled(source: str, fmt: str, **kwargs) -> str:
    """Compile ``source`` unbound; its kind (for cases that only must end cleanly)."""
    import gramc

    return gramc.compile(source, fmt, **kwargs).kind


_BASE_SOURCES = {"dfa": (r"\(x\)|ab+", "regex"), "pda": ('root ::= "(" root ")" | "x"', "gbnf"),
                 "counted": ("(ab){1,3000}z", "regex")}
#: The folder where :func:`run_cases` leaves the base artifacts for its children.
_BASE_DIR = "GRAMC_HOSTILE_ARTIFACTS"


def base_artifact(kind: str):
    """A small bound artifact of ``kind`` (``dfa``, ``pda``, ``counted``), compiled once per
    run (the children load it: a compile costs seconds, a load milliseconds)."""
    import gramc

    folder = os.environ.get(_BASE_DIR)
    if folder and os.path.exists(os.path.join(folder, f"{kind}.gmask")):
        return gramc.load(os.path.join(folder, f"{kind}.gmask"), vocab=tiny_vocab())
    source, fmt = _BASE_SOURCES[kind]
    art = gramc.compile(source, fmt, vocab=tiny_vocab())
    assert art.kind == kind, art.kind
    return art


def document(art) -> dict:
    """The container document of ``art`` as plain values, to tamper with and re-sign."""
    meta, arrays = art.to_arrays()
    entries = {name: {"data": a.tobytes(), "dtype": a.dtype.str, "shape": list(a.shape)} for name, a in arrays.items()}
    return {"arrays": entries, "meta": json.loads(json.dumps(meta))}


def set_array(doc: dict, name: str, array) -> None:
    doc["arrays"][name] = {"data": array.tobytes(), "dtype": array.dtype.str, "shape": list(array.shape)}


def get_array(doc: dict, name: str):
    import numpy as np

    e = doc["arrays"][name]
    return np.frombuffer(e["data"], dtype=e["dtype"]).reshape(e["shape"]).copy()


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def sign(body: bytes, *, frame: bytes | None = None, content_length: int | None = None,
         payload_length: int | None = None) -> bytes:
    """A ``.gmask`` file of the msgpack ``body``, with a correct SHA-256 (a re-signed file:
    only ``verify=True`` against the vocabulary can tell it from a compiler's)."""
    import zstandard

    if frame is None:
        frame = zstandard.ZstdCompressor(level=3, write_checksum=True, write_content_size=True).compress(body)
    head = struct.pack("<4s4sHHIQQ", b"GMSK", b"\r\n\x1a\n", 1, 0, 0,
                       len(frame) if payload_length is None else payload_length,
                       len(body) if content_length is None else content_length)
    return head + hashlib.sha256(head + frame).digest() + frame


def forged(doc: dict) -> bytes:
    import msgpack

    return sign(msgpack.packb(_sorted(doc), use_bin_type=True))


def tampered(kind: str, change: Callable[[dict], None]) -> bytes:
    doc = document(base_artifact(kind))
    change(doc)
    return forged(doc)


def load_bytes(data: bytes, **kwargs) -> Any:
    """Load ``data`` (with the vocabulary the base artifacts bind, unless ``vocab`` says
    otherwise); what a matcher of it allows at the start (the answer of a load that succeeds)."""
    import gramc

    art = gramc.from_bytes(data, **{"vocab": tiny_vocab(), **kwargs})  # as a decoder loads it
    return art.matcher().allowed_tokens().tolist() if art.is_bound else art.kind


def meta_set(path: str, value: Any) -> Callable[[dict], None]:
    """A change setting ``meta[path]`` (dotted) to ``value``."""
    *parents, last = path.split(".")

    def change(doc: dict) -> None:
        target = doc["meta"]
        for p in parents:
            target = target[p]
        target[last] = value
    return change


def array_set(name: str, index: Any, value: int) -> Callable[[dict], None]:
    def change(doc: dict) -> None:
        a = get_array(doc, name)
        a.reshape(-1)[index] = value
        set_array(doc, name, a)
    return change


def dense_calls(delta, indptr, rule, ret, n_rules: int):
    """A PDA table's reads ``delta`` and its sparse calls as layouts 1-7 stored them: one
    call column per rule after the read columns."""
    import numpy as np

    out = np.zeros((len(delta), delta.shape[1] + n_rules), np.int32)
    out[:, : delta.shape[1]] = delta
    nodes = np.repeat(np.arange(len(delta)), np.diff(indptr))
    out[nodes, delta.shape[1] + rule] = ret
    return out


def rows_by_ids(indptr, word, value, complement, vocab_size: int):
    """Rows in the word form (layout 10) as layouts 5 to 9 stored them, by token ids:
    ``(indptr, ids, complement)``, each row listing its set ids or, where more than half
    are set, the ids it leaves out."""
    import numpy as np

    from gramc.bitmask import WordRows

    packed = WordRows(indptr, word, value, complement, vocab_size)[np.arange(len(complement))]
    bits = np.unpackbits(packed.view(np.uint8), axis=1, bitorder="little")[:, :vocab_size].astype(bool)
    flags = bits.sum(axis=1) > vocab_size // 2
    row, ids = np.nonzero(bits ^ flags[:, None])
    counts = np.bincount(row, minlength=len(flags))
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), ids.astype(np.int32), flags


def packed_rows_of_ids(indptr, ids, complement, vocab_size: int):
    """Rows by token ids (layouts 5 to 9) as packed rows."""
    import numpy as np

    from gramc.bitmask import WordRows, word_rows_of_ids

    return WordRows(*word_rows_of_ids(indptr, ids, complement, vocab_size), vocab_size)[np.arange(len(complement))]


def as_layout_9(doc: dict) -> None:
    """A PDA document with its node rows and stored configuration masks by token ids, as
    layouts 5 to 9 stored them."""
    size = doc["meta"]["vocab"]["size"]
    for section in ("nodes", "configs"):
        form = [get_array(doc, f"{section}.row_{k}") for k in ("indptr", "word", "value", "complement")]
        for k in ("indptr", "word", "value", "complement"):
            del doc["arrays"][f"{section}.row_{k}"]
        for k, array in zip(("indptr", "ids", "complement"), rows_by_ids(*form, size)):
            set_array(doc, f"{section}.row_{k}", array)
    doc["meta"]["artifact_version"] = 9


def as_layout_8(doc: dict) -> None:
    """A PDA document without stored configuration masks, as layout 8 stored it."""
    if doc["meta"]["vocab"] is not None and doc["meta"]["artifact_version"] == 10:
        as_layout_9(doc)
    for name in [n for n in doc["arrays"] if n.startswith("configs.")]:
        del doc["arrays"][name]
    doc["meta"]["pda"].pop("config_depth", None)
    doc["meta"]["artifact_version"] = 8


def as_layout_7(doc: dict) -> None:
    """A PDA document with its calls as call columns, as layouts 1-7 stored them."""
    as_layout_8(doc)
    calls = [get_array(doc, f"pda.call_{k}") for k in ("indptr", "rule", "return")]
    for k in ("indptr", "rule", "return"):
        del doc["arrays"][f"pda.call_{k}"]
    set_array(doc, "pda.delta", dense_calls(get_array(doc, "pda.delta"), *calls,
                                            len(get_array(doc, "pda.rule_start"))))


def as_layout_3(doc: dict) -> None:
    """A bound PDA document as layout 3 wrote it: the distinct node rows packed, the
    vocabulary's token bytes and the calls as columns (for the cases of files written
    before layout 5)."""
    from gramc.runtime.vocab_bytes import vocab_arrays

    as_layout_7(doc)

    rows = packed_rows_of_ids(*(get_array(doc, f"nodes.row_{k}") for k in ("indptr", "ids", "complement")),
                              doc["meta"]["vocab"]["size"])
    for name in ("nodes.row_indptr", "nodes.row_ids", "nodes.row_complement", "pda.finish_rank"):
        del doc["arrays"][name]
    set_array(doc, "nodes.rows", rows)
    for name, array in vocab_arrays(tiny_vocab()).items():
        set_array(doc, name, array)
    doc["meta"]["artifact_version"] = 3


def in_layout_9(*changes: Callable[[dict], None]) -> Callable[[dict], None]:
    def change(doc: dict) -> None:
        as_layout_9(doc)
        for c in changes:
            c(doc)
    return change


def in_layout_3(*changes: Callable[[dict], None]) -> Callable[[dict], None]:
    def change(doc: dict) -> None:
        as_layout_3(doc)
        for c in changes:
            c(doc)
    return change


def shape_set(name: str, shape: list) -> Callable[[dict], None]:
    """Declare another shape for the array, its data left as it is."""
    def change(doc: dict) -> None:
        doc["arrays"][name]["shape"] = shape
    return change


# =========================================================================== compile: deep nesting

@case("nesting", "regex-groups-499", ok=[True, True, False])
def _():
    n = 499
    return language("(" * n + "a" + ")" * n + "b*", "regex", ["a", "abbb", "b"])


@case("nesting", "regex-groups-501", error="LimitExceededError", match=r"1:501: limit max_nesting exceeded: 501 > 500")
def _():
    return compiled("(" * 501 + "a" + ")" * 501, "regex")


@case("nesting", "regex-groups-200000", error="LimitExceededError", match=r"1:501: limit max_nesting")
def _():
    return compiled("(" * 200_000 + "a" + ")" * 200_000, "regex")


@case("nesting", "regex-unclosed-100000", error="GramcError", match=r"1:\d+: ")
def _():
    return compiled("(" * 100_000, "regex")


@case("nesting", "gbnf-parens-400", ok=[True, False])
def _():
    return language('root ::= ' + '(' * 400 + '"a" "b"' + ')' * 400, "gbnf", ["ab", "a"])


@case("nesting", "gbnf-parens-50000", error="LimitExceededError", match=r"1:\d+: limit max_nesting")
def _():
    return compiled('root ::= ' + '(' * 50_000 + '"a"' + ')' * 50_000, "gbnf")


@case("nesting", "lark-parens-50000", error="LimitExceededError", match=r"1:\d+: limit max_nesting")
def _():
    return compiled('start: ' + '(' * 50_000 + '"a"' + ')' * 50_000, "lark")


@case("nesting", "ebnf-parens-50000", error="LimitExceededError", match=r"1:\d+: limit max_nesting")
def _():
    return compiled('root = ' + '(' * 50_000 + '"a"' + ')' * 50_000 + ' ;', "ebnf")


@case("nesting", "gbnf-recursive-brackets", ok=[True, True, False])
def _():
    # a recursive grammar checked with input nested 20,000 deep
    return language('root ::= "[" root? "]"', "gbnf", ["[]", "[" * 20_000 + "]" * 20_000, "[" * 20_000 + "]" * 19_999])


@case("nesting", "schema-items-240", ok=[True, False])
def _():
    schema: dict = {"type": "integer"}
    for _ in range(240):
        schema = {"type": "array", "items": schema, "maxItems": 1}
    return language(json.dumps(schema), "json_schema", ["[" * 240 + "1" + "]" * 240, "[" * 240 + '"1"' + "]" * 240])


@case("nesting", "schema-items-20000", error="SchemaError", match=r"#: invalid JSON in <input>: maximum recursion depth")
def _():
    n = 20_000
    return compiled('{"type": "array", "items": ' * n + '{"type": "integer"}' + "}" * n, "json_schema")


@case("nesting", "schema-document-100000", error="GramcError", match=r"nest|depth|JSON")
def _():
    # not a schema at all: a document nested past any sane parser's depth
    return compiled('{"const": ' + "[" * 100_000 + "]" * 100_000 + "}", "json_schema")


@case("nesting", "schema-self-ref", ok=[True, True, False])
def _():
    schema = {"type": "array", "items": {"$ref": "#"}}
    return language(json.dumps(schema), "json_schema", ["[]", "[[],[[[]]]]", "[1]"])


# =========================================================================== compile: chains and cycles


def gbnf_chain(n: int) -> str:
    return "root ::= r0\n" + "".join(f'r{i} ::= "a" r{i + 1}\n' for i in range(n)) + f'r{n} ::= "z"\n'


def gbnf_cycle(n: int) -> str:
    return "root ::= r0\n" + "".join(f'r{i} ::= "a" r{i + 1} | "z"\n' for i in range(n - 1)) + \
        f'r{n - 1} ::= "b" r0 | "z"\n'


@case("chains", "gbnf-chain-3000", ok=[True, False, False])
def _():
    n = 3000
    return language(gbnf_chain(n), "gbnf", ["a" * n + "z", "a" * (n - 1) + "z", "a" * (n + 1) + "z"])


@case("chains", "lark-chain-3000", ok=[True, False])
def _():
    n = 3000
    source = "start: r0\n" + "".join(f'r{i}: "a" r{i + 1}\n' for i in range(n)) + f'r{n}: "z"\n'
    return language(source, "lark", ["a" * n + "z", "a" * n])


@case("chains", "gbnf-chain-10000", ok=[True, False], slow=True)
def _():
    n = 10_000
    return language(gbnf_chain(n), "gbnf", ["a" * n + "z", "a" * (n - 1) + "z"])


@case("chains", "gbnf-undefined-at-end-of-5000", error="GrammarSyntaxError", match=r"5002:\d+: undefined rule 'r5001'")
def _():
    return compiled(gbnf_chain(5000).replace('r5000 ::= "z"', 'r5000 ::= r5001'), "gbnf")


@case("chains", "gbnf-10000-unused-rules", ok=[True, False])
def _():
    source = 'root ::= "a"\n' + "".join(f'u{i} ::= "b" u{i + 1}\n' for i in range(10_000)) + 'u10000 ::= "c"\n'
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return language(source, "gbnf", ["a", "b"])


@case("cycles", "gbnf-cycle-300", ok=[True, True, False])
def _():
    n = 300
    around = "a" * (n - 1) + "b"
    return language(gbnf_cycle(n), "gbnf", ["z", around * 2 + "aaz", "a" * n + "z"])


@case("cycles", "gbnf-cycle-1000", ok=[True, True, False])
def _():
    n = 1000
    around = "a" * (n - 1) + "b"
    return language(gbnf_cycle(n), "gbnf", ["z", around * 3 + "az", "a" * n + "z"])


@case("cycles", "gbnf-left-recursion", error="UnsupportedFeatureError", match=r"1:1: rule 'root' is left-recursive")
def _():
    return compiled('root ::= root "a" | "b"', "gbnf")


@case("cycles", "gbnf-unproductive-cycle", error="GramcError", match=r"root|r0|empty|product")
def _():
    return compiled('root ::= r0\nr0 ::= "a" r1\nr1 ::= "b" r0\n', "gbnf")


# =========================================================================== compile: huge counts


@case("counts", "regex-a{100000}", ok=[True, False])
def _():
    return language("a{100000}", "regex", ["a" * 100_000, "a" * 99_999])


@case("counts", "regex-a{100001}", error="LimitExceededError", match=r"1:2: limit max_repeat exceeded: 100001 > 100000")
def _():
    return compiled("a{100001}", "regex")


@case("counts", "regex-a{2**31}", error="LimitExceededError", match=r"1:2: limit max_repeat exceeded: 2147483648")
def _():
    return compiled("a{2147483648}", "regex")


@case("counts", "regex-a{10**100}", error="LimitExceededError", match=r"1:2: limit max_repeat exceeded")
def _():
    return compiled("a{" + "9" * 100 + "}", "regex")


@case("counts", "regex-reversed-bounds", error="GrammarSyntaxError", match=r"1:\d+: ")
def _():
    return compiled("a{5,2}", "regex")


@case("counts", "regex-nested-counted-40", ok=[True, True, False], error="LimitExceededError",
      match=r"limit max_(memory|dfa_states|nfa_states) exceeded.*(NFA|DFA|repetition)")
def _():
    # (issue 18 finding 5) determinises to a{1,64000}; it passed 4.5 GB before a limit fired
    return language("((a{1,40}){1,40}){1,40}", "regex", ["a", "a" * 64_000, "a" * 64_001])


@case("counts", "regex-nested-counted-ab-20", ok=[True, False], error="LimitExceededError",
      match=r"limit max_(memory|dfa_states|nfa_states) exceeded")
def _():
    return language("((ab{1,20}){1,20}){1,20}", "regex", ["ab", "ac"])


@case("counts", "regex-classes-{1,3000}-bound", ok=[True, False], error="LimitExceededError",
      match=r"limit max_(memory|dfa_states) exceeded")
def _():
    import gramc

    m = gramc.compile("[a-z]{1,3000}z", vocab=tiny_vocab()).matcher()
    return [m.commit_bytes(b"ab" * 700 + b"z") and m.is_complete(), m.commit_bytes(b"(")]


@case("counts", "gbnf-a{100000}", ok=[True, False])
def _():
    return language('root ::= "a"{100000}', "gbnf", ["a" * 100_000, "a" * 100_001])


@case("counts", "lark-a~100001", error="LimitExceededError", match=r"1:\d+: limit max_repeat")
def _():
    return compiled('start: "a"~100001', "lark")


@case("counts", "schema-maxLength-10**12", ok=[True, False])
def _():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # over the counted length: an over-approximation, with a warning
        return language('{"type": "string", "maxLength": 1000000000000}', "json_schema", ['"abc"', "1"])


@case("counts", "schema-minItems-10**9", ok=[False, False], error="LimitExceededError", match=r"minItems|max_repeat")
def _():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return language('{"type": "array", "minItems": 1000000000}', "json_schema", ["[]", "[1]"])


@case("counts", "schema-maxLength-2**70", ok=[True, False], error="SchemaError", match=r"maxLength")
def _():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return language('{"type": "string", "maxLength": 1180591620717411303424}', "json_schema", ['"a"', "1"])


@case("counts", "schema-minimum-1e308", ok=[True, False])
def _():
    return language('{"type": "number", "minimum": 1e308}', "json_schema", ["2e308", "1"])


# =========================================================================== compile: width


@case("width", "regex-alternation-20000", ok=[True, True, False])
def _():
    words = [f"w{i}x" for i in range(20_000)]
    return language("|".join(words), "regex", ["w0x", "w19999x", "w20000x"])


@case("width", "gbnf-alternation-20000", ok=[True, False])
def _():
    return language("root ::= " + " | ".join(f'"v{i}"' for i in range(20_000)), "gbnf", ["v12345", "v20000"])


@case("width", "regex-class-all-unicode", ok=[True, True, False])
def _():
    return language("[\\u0000-\\u{10FFFF}]{3}", "regex", ["abc", "\U0010ffff\u00e9a", "ab"], options=None)


@case("width", "regex-1MB-literal", ok=[True, False], error="LimitExceededError",
      match=r"max_nfa_states exceeded: 1000001 > 250000 \(every rule inlined")
def _():
    text = "ab" * 500_000
    return language(text, "regex", [text, text[:-1]])


@case("width", "schema-enum-20000", ok=[True, True, False])
def _():
    values = [f"s{i}" for i in range(20_000)]
    return language(json.dumps({"enum": values}), "json_schema", ['"s0"', '"s19999"', '"s20000"'])


@case("width", "schema-enum-100000", ok=[True, False], slow=True, wall=15)
def _():
    # A listed enum is one trie of spellings (schemas/trie.py): ~3 s, 110 MB, a DFA (was 45 s, a PDA)
    values = [f"value-{i}" for i in range(100_000)]
    return language(json.dumps({"enum": values}), "json_schema", ['"value-99999"', '"value-100000"'])


@case("width", "schema-enum-10000-integers", ok=[True, False])
def _():
    # Numbers are spelled from their digits into the enum's trie: 20,000 integers take ~3 s (was 28 s)
    return language(json.dumps({"enum": list(range(0, 20_000, 2))}), "json_schema", ["19998", "19999"])


@case("width", "schema-properties-2000", ok=[True, False], wall=15)
def _():
    # Many optional properties are a chain of rules (objects._chained_body): ~7 s, 120 MB, a PDA (was 93 s, 3 GB)
    props = {f"p{i}": {"type": "integer"} for i in range(2000)}
    schema = {"type": "object", "properties": props, "additionalProperties": False}
    return language(json.dumps(schema), "json_schema", ['{"p1999":1}', '{"p2000":1}'])


@case("width", "schema-invalid-pattern", error="SchemaError", match=r"#/pattern")
def _():
    return compiled('{"type": "string", "pattern": "[a-"}', "json_schema")


# =========================================================================== load: declared sizes


@case("artifact", "vocab-size-2**31-1-dfa", error="ArtifactFormatError", match=r"metadata.vocab.size 2147483647 .*max_vocab_size")
def _():
    return load_bytes(tampered("dfa", meta_set("vocab.size", 2**31 - 1)))


@case("artifact", "vocab-size-2**31-1-pda", error="ArtifactFormatError", match=r"metadata.vocab.size 2147483647 .*max_vocab_size")
def _():
    return load_bytes(tampered("pda", meta_set("vocab.size", 2**31 - 1)))


@case("artifact", "vocab-size-2**31-1-counted", error="ArtifactFormatError", match=r"metadata.vocab.size 2147483647")
def _():
    return load_bytes(tampered("counted", meta_set("vocab.size", 2**31 - 1)))


@case("artifact", "vocab-size-2**64-1", error="ArtifactFormatError", match=r"metadata.vocab.size")
def _():
    return load_bytes(tampered("dfa", meta_set("vocab.size", 2**64 - 1)))


@case("artifact", "vocab-size-0", error="ArtifactFormatError", match=r"metadata.vocab")
def _():
    return load_bytes(tampered("dfa", meta_set("vocab.size", 0)))


@case("artifact", "vocab-size-str", error="ArtifactFormatError", match=r"metadata.vocab.*size")
def _():
    return load_bytes(tampered("dfa", meta_set("vocab.size", "9")))


@case("artifact", "vocab-size-2**24-dfa", ok=[0, 4, 7])
def _():
    # the largest size a reader accepts: the rows grow to 2 MiB each, and still say the same
    return load_bytes(tampered("dfa", meta_set("vocab.size", 2**24)))


def dfa_chain(n_states: int, vocab_size: int, distinct: bool = False) -> bytes:
    """A DFA file of ``n_states`` states in a chain (each reads "a", the last accepts),
    declared bound to ``vocab_size`` tokens: none allowed anywhere, or (``distinct``) two per
    state, a different pair in each (every state's packed row is its own)."""
    import numpy as np

    doc = document(base_artifact("dfa"))
    delta = np.zeros((n_states, 2), np.int32)
    delta[1:-1, 1] = np.arange(2, n_states, dtype=np.int32)
    accept = np.zeros(n_states, bool)
    accept[-1] = True
    classes = np.zeros(256, np.uint8)
    classes[ord("a")] = 1
    indptr, ids, nxt = np.zeros(n_states + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32)
    if distinct:  # state q (live ones: 1..n-1) allows tokens q % 25,000 and 25,000 + q // 25,000
        live = np.arange(1, n_states, dtype=np.int32)
        indptr[2:] = 2 * np.arange(1, n_states, dtype=np.int64)
        ids = np.column_stack([live % 25_000, 25_000 + live // 25_000]).reshape(-1).astype(np.int32)
        nxt = np.repeat(live, 2)  # each token stays in its state
    for name, a in {"dfa.delta": delta, "dfa.accept": accept, "dfa.byte_class": classes,
                    "dfa.token_ids": np.zeros(0, np.int32), "tokens.indptr": indptr,
                    "tokens.ids": ids, "tokens.next": nxt,
                    "tokens.forced": np.full(n_states, -1, np.int32)}.items():
        set_array(doc, name, a)
    doc["meta"]["dfa"]["start"] = 1
    doc["meta"]["vocab"]["size"] = vocab_size
    doc["meta"]["vocab"]["eos_ids"] = []
    return forged(doc)


@case("artifact", "states-2**19-vocab-2**24", error="ArtifactFormatError",
      match=r"524288 distinct token rows of 16777216-token rows need .* max_derived_bytes")
def _():
    return load_bytes(dfa_chain(2**19, 2**24, distinct=True))


@case("artifact", "states-2**19-vocab-50257-rows-equal", ok=[])
def _():
    # 2**19 states allowing no token share one packed row (3.07 GiB if each had its own)
    return load_bytes(dfa_chain(2**19, 50_257))


@case("artifact", "states-2**19-vocab-50257-rows-distinct", error="ArtifactFormatError",
      match=r"524288 distinct token rows of 50257-token rows need 3294625792 bytes, over max_derived_bytes=1073741824")
def _():
    return load_bytes(dfa_chain(2**19, 50_257, distinct=True))


@case("artifact", "states-2**16-vocab-50257-rows-distinct", ok=[1, 25_000])
def _():
    # 65,535 distinct rows: 412 MB of packed rows, within the default limit
    return load_bytes(dfa_chain(2**16, 50_257, distinct=True))


def pda_chain(n_nodes: int, finishes: bool = True, layout: int = 9) -> bytes:
    """An unbound PDA file of one rule whose nodes are a chain reading "a" (the last one
    accepting when ``finishes``), with its finishing ranks (layout 9) or without them (layout
    3: the productivity check propagates, one node per round)."""
    import numpy as np

    import gramc
    from gramc.automata.pda_table import no_calls

    doc = document(gramc.compile(_BASE_SOURCES["pda"][0], "gbnf"))
    delta = np.zeros((n_nodes + 1, 2), np.int32)  # byte classes "other" and "a"
    delta[1:n_nodes, 1] = np.arange(2, n_nodes + 1, dtype=np.int32)
    accept = np.zeros(n_nodes + 1, bool)
    accept[n_nodes] = finishes
    node_rule = np.zeros(n_nodes + 1, np.int32)
    node_rule[0] = -1
    classes = np.zeros(256, np.uint8)
    classes[ord("a")] = 1
    ranks = np.arange(n_nodes, -1, -1, dtype=np.int32)  # node k: n_nodes - k steps from the end
    ranks[0] = -1
    for name, a in {"pda.delta": delta, "pda.accept": accept, "pda.node_rule": node_rule,
                    "pda.rule_start": np.array([1], np.int32), "pda.byte_class": classes,
                    "pda.token_ids": np.zeros(0, np.int32), "pda.finish_rank": ranks,
                    **{f"pda.{k}": v for k, v in no_calls(n_nodes + 1).items()}}.items():
        set_array(doc, name, a)
    doc["meta"]["pda"].update(start_rule=0, rule_names=["root"])
    if layout == 3:
        as_layout_7(doc)
        del doc["arrays"]["pda.finish_rank"]
        doc["meta"]["artifact_version"] = 3
    return forged(doc)


@case("artifact", "pda-chain-2**20-nodes", ok="pda")
def _():
    return load_bytes(pda_chain(2**20), vocab=None)


@case("artifact", "pda-chain-2**20-nodes-unfinished", error="ArtifactFormatError",
      match=r"pda: node 1048576 cannot finish its rule \(pda.finish_rank shows no way\)")
def _():
    return load_bytes(pda_chain(2**20, finishes=False), vocab=None)


@case("artifact", "pda-chain-2**20-nodes-layout-3", ok="pda")
def _():
    return load_bytes(pda_chain(2**20, layout=3), vocab=None)


@case("artifact", "pda-chain-2**20-nodes-layout-3-unfinished", error="ArtifactFormatError",
      match=r"pda: node 1 cannot finish its rule$")
def _():
    return load_bytes(pda_chain(2**20, finishes=False, layout=3), vocab=None)


@case("artifact", "pda-calls-int32-max-rule", error="ArtifactFormatError", match=r"array 'pda.call_rule': value 2147483647")
def _():
    return load_bytes(tampered("pda", array_set("pda.call_rule", 0, 2**31 - 1)))


@case("artifact", "pda-calls-return-dead", error="ArtifactFormatError", match=r"array 'pda.call_return': value 0")
def _():
    return load_bytes(tampered("pda", array_set("pda.call_return", 0, 0)))


@case("artifact", "pda-calls-indptr-2**62", error="ArtifactFormatError", match=r"pda.call_indptr")
def _():
    return load_bytes(tampered("pda", array_set("pda.call_indptr", -1, 2**62)))


@case("artifact", "states-2**22-declared", error="ArtifactFormatError", match=r"array 'dfa.delta': shape \[4194304, 2\] of <i4 needs")
def _():
    return load_bytes(tampered("dfa", shape_set("dfa.delta", [2**22, 2])))


@case("artifact", "shape-2**40-elements", error="ArtifactFormatError", match=r"array 'tokens.ids': shape .* over max_array_elements")
def _():
    return load_bytes(tampered("dfa", shape_set("tokens.ids", [2**20, 2**20])))


@case("artifact", "shape-2**64-dim", error="ArtifactFormatError", match=r"array 'tokens.ids': shape")
def _():
    return load_bytes(tampered("dfa", shape_set("tokens.ids", [0, 2**64 - 1])))


@case("artifact", "shape-negative", error="ArtifactFormatError", match=r"array 'dfa.accept': shape .* not a non-negative int")
def _():
    return load_bytes(tampered("dfa", shape_set("dfa.accept", [-1])))


@case("artifact", "shape-64-dims", error="ArtifactFormatError", match=r"array 'dfa.accept': 64 dimensions exceed max_ndim")
def _():
    return load_bytes(tampered("dfa", shape_set("dfa.accept", [1] * 64)))


@case("artifact", "dtype-object", error="ArtifactFormatError", match=r"array 'dfa.accept': dtype '\|O'")
def _():
    def change(doc):
        doc["arrays"]["dfa.accept"]["dtype"] = "|O"
    return load_bytes(tampered("dfa", change))


@case("artifact", "dfa-start-2**63-1", error="ArtifactFormatError", match=r"metadata.dfa.start 9223372036854775807 outside")
def _():
    return load_bytes(tampered("dfa", meta_set("dfa.start", 2**63 - 1)))


@case("artifact", "dfa-delta-int32-max", error="ArtifactFormatError", match=r"array 'dfa.delta': value 2147483647 at (position|flat index)")
def _():
    return load_bytes(tampered("dfa", array_set("dfa.delta", 3, 2**31 - 1)))


@case("artifact", "dfa-delta-negative", error="ArtifactFormatError", match=r"array 'dfa.delta': value -2147483648")
def _():
    return load_bytes(tampered("dfa", array_set("dfa.delta", 3, -2**31)))


@case("artifact", "tokens-indptr-2**62", error="ArtifactFormatError", match=r"tokens.indptr")
def _():
    return load_bytes(tampered("dfa", array_set("tokens.indptr", -1, 2**62)))


@case("artifact", "tokens-ids-int32-max", error="ArtifactFormatError", match=r"array 'tokens.ids': value 2147483647")
def _():
    return load_bytes(tampered("dfa", array_set("tokens.ids", 0, 2**31 - 1)))


@case("artifact", "tokens-forced-int32-max", error="ArtifactFormatError", match=r"array 'tokens.forced': value 2147483647")
def _():
    return load_bytes(tampered("dfa", array_set("tokens.forced", 1, 2**31 - 1)))


@case("artifact", "eos-ids-2**40", error="ArtifactFormatError", match=r"metadata.vocab.eos_ids")
def _():
    return load_bytes(tampered("dfa", meta_set("vocab.eos_ids", [2**40])))


@case("artifact", "eos-ids-1M-entries", error="ArtifactFormatError", match=r"metadata.vocab.eos_ids")
def _():
    return load_bytes(tampered("dfa", meta_set("vocab.eos_ids", list(range(10**6, 10**6 + (1 << 20))))))


@case("artifact", "pda-rule-start-int32-max", error="ArtifactFormatError", match=r"array 'pda.rule_start': value 2147483647")
def _():
    return load_bytes(tampered("pda", array_set("pda.rule_start", 0, 2**31 - 1)))


@case("artifact", "pda-start-rule-2**63-1", error="ArtifactFormatError", match=r"metadata.pda start_rule")
def _():
    return load_bytes(tampered("pda", meta_set("pda.start_rule", 2**63 - 1)))


@case("artifact", "pda-depth-2**31", error="ArtifactFormatError", match=r"metadata.pda start_rule or depth")
def _():
    return load_bytes(tampered("pda", meta_set("pda.depth", 2**31)))


@case("artifact", "pda-rule-names-1M", error="ArtifactFormatError", match=r"metadata.pda.rule_names")
def _():
    return load_bytes(tampered("pda", meta_set("pda.rule_names", [f"r{i}" for i in range(1 << 20)])))


@case("artifact", "pda-row-of-int32-max", error="ArtifactFormatError", match=r"array 'nodes.row_of': value 2147483647")
def _():
    return load_bytes(tampered("pda", array_set("nodes.row_of", 0, 2**31 - 1)))


@case("artifact", "pda-row-of-below-minus-1", error="ArtifactFormatError", match=r"array 'nodes.row_of': value -2147483648")
def _():
    return load_bytes(tampered("pda", array_set("nodes.row_of", 0, -2**31)))


@case("artifact", "pda-rows-padding-bits", error="ArtifactFormatError", match=r"padding bits")
def _():
    return load_bytes(tampered("pda", in_layout_3(array_set("nodes.rows", -1, 0xFFFFFFFF))))


@case("artifact", "pda-rows-width-2**20", error="ArtifactFormatError", match=r"ceil\(V/32\)|nodes.rows")
def _():
    import numpy as np

    def change(doc):
        rows = len(get_array(doc, "nodes.rows"))
        set_array(doc, "nodes.rows", np.random.default_rng(0).integers(0, 2**32, (rows, 1 << 20), dtype=np.uint32))
    return load_bytes(tampered("pda", in_layout_3(change)))


@case("artifact", "pda-row-ids-int32-max", error="ArtifactFormatError", match=r"array 'nodes.row_ids': value 2147483647")
def _():
    return load_bytes(tampered("pda", in_layout_9(array_set("nodes.row_ids", -1, 2**31 - 1))))


@case("artifact", "pda-row-word-int32-max", error="ArtifactFormatError", match=r"array 'nodes.row_word': value 2147483647")
def _():
    return load_bytes(tampered("pda", array_set("nodes.row_word", -1, 2**31 - 1)))


@case("artifact", "pda-row-value-past-vocab", error="ArtifactFormatError", match=r"nodes.row_value sets bits past")
def _():
    return load_bytes(tampered("pda", array_set("nodes.row_value", -1, 2**32 - 1)))


@case("artifact", "pda-row-indptr-2**62", error="ArtifactFormatError", match=r"nodes.row_indptr")
def _():
    return load_bytes(tampered("pda", array_set("nodes.row_indptr", -1, 2**62)))


@case("artifact", "pda-row-ids-1M-unsorted", error="ArtifactFormatError", match=r"nodes.row_ids")
def _():
    import numpy as np

    def change(doc):
        set_array(doc, "nodes.row_ids", np.random.default_rng(0).integers(0, 9, 1 << 20, dtype=np.int32))
        set_array(doc, "nodes.row_indptr", np.array([0] + [1 << 20] * (len(get_array(doc, "nodes.row_indptr")) - 1)))
    return load_bytes(tampered("pda", in_layout_9(change)))


@case("artifact", "pda-row-words-1M-unsorted", error="ArtifactFormatError", match=r"nodes.row_word")
def _():
    import numpy as np

    def change(doc):
        set_array(doc, "nodes.row_word", np.zeros(1 << 20, dtype=np.int32))
        set_array(doc, "nodes.row_value", np.random.default_rng(0).integers(1, 9, 1 << 20, dtype=np.uint32))
        set_array(doc, "nodes.row_indptr", np.array([0] + [1 << 20] * (len(get_array(doc, "nodes.row_indptr")) - 1)))
    return load_bytes(tampered("pda", change))


@case("artifact", "pda-configs-digests-descending", error="ArtifactFormatError", match=r"configs.digest must be ascending")
def _():
    def change(doc):
        set_array(doc, "configs.digest", get_array(doc, "configs.digest")[::-1].copy())
    return load_bytes(tampered("pda", change))


@case("artifact", "pda-configs-row-int32-max", error="ArtifactFormatError", match=r"array 'configs.row': value 2147483647")
def _():
    return load_bytes(tampered("pda", array_set("configs.row", 0, 2**31 - 1)))


@case("artifact", "pda-configs-enc-indptr-2**62", error="ArtifactFormatError", match=r"configs.enc_indptr")
def _():
    return load_bytes(tampered("pda", array_set("configs.enc_indptr", -1, 2**62)))


@case("artifact", "pda-configs-one-encoding-of-1M", error="ArtifactFormatError", match=r"encoding is longer than")
def _():
    import numpy as np

    def change(doc):
        n = len(get_array(doc, "configs.digest"))
        set_array(doc, "configs.enc", np.random.default_rng(0).integers(0, 2**31 - 1, 1 << 20, dtype=np.int32))
        set_array(doc, "configs.enc_indptr", np.array([0] + [1 << 20] * n, np.int64))
    return load_bytes(tampered("pda", change))


@case("artifact", "pda-configs-row-word-int32-max", error="ArtifactFormatError", match=r"array 'configs.row_word': value 2147483647")
def _():
    return load_bytes(tampered("pda", array_set("configs.row_word", -1, 2**31 - 1)))


@case("artifact", "pda-configs-row-value-past-vocab", error="ArtifactFormatError", match=r"configs.row_value sets bits past")
def _():
    return load_bytes(tampered("pda", array_set("configs.row_value", -1, 2**32 - 1)))


@case("artifact", "pda-configs-layout-9-row-ids-int32-max", error="ArtifactFormatError",
      match=r"array 'configs.row_ids': value 2147483647")
def _():
    return load_bytes(tampered("pda", in_layout_9(array_set("configs.row_ids", -1, 2**31 - 1))))


@case("artifact", "pda-configs-layout-9-1M-rows", ok=[0, 2])
def _():
    # A million empty stored rows in layout 9 (complements at random, so that the payload
    # compresses less than the ratio limit allows) convert in linear time: none is expanded.
    import numpy as np

    def change(doc):
        as_layout_9(doc)
        n = len(get_array(doc, "configs.row_complement"))
        ids = get_array(doc, "configs.row_ids")
        set_array(doc, "configs.row_indptr", np.concatenate([get_array(doc, "configs.row_indptr"),
                                                             np.full(1 << 20, len(ids), np.int64)]))
        set_array(doc, "configs.row_complement", np.concatenate([get_array(doc, "configs.row_complement"),
                                                                 np.random.default_rng(0).random(1 << 20) < 0.5]))
        assert n
    return load_bytes(tampered("pda", change))


@case("artifact", "pda-configs-depth-2**31", error="ArtifactFormatError", match=r"pda.config_depth")
def _():
    return load_bytes(tampered("pda", meta_set("pda.config_depth", 2**31)))


@case("artifact", "pda-configs-depth-missing", error="ArtifactFormatError", match=r"'config_depth' is missing")
def _():
    return load_bytes(tampered("pda", lambda doc: doc["meta"]["pda"].pop("config_depth")))


@case("artifact", "pda-configs-in-layout-8", error="ArtifactFormatError", match=r"unexpected arrays \['configs.")
def _():
    return load_bytes(tampered("pda", meta_set("artifact_version", 8)))


@case("artifact", "pda-configs-encodings-scrambled", ok=[0, 2])
def _():
    # Wrong encodings only fail to match: the masks are computed instead, still exact ("(", "x").
    import numpy as np

    def change(doc):
        enc = get_array(doc, "configs.enc")
        set_array(doc, "configs.enc", np.random.default_rng(0).permutation(enc).astype(np.int32))
    return load_bytes(tampered("pda", change))


@case("artifact", "pda-finish-ranks-reversed", error="ArtifactFormatError", match=r"finish_rank shows no way")
def _():
    def change(doc):
        set_array(doc, "pda.finish_rank", -get_array(doc, "pda.finish_rank"))
    return load_bytes(tampered("pda", change))


@case("artifact", "pda-unc-indptr-2**62", error="ArtifactFormatError", match=r"nodes.unc_indptr")
def _():
    return load_bytes(tampered("pda", array_set("nodes.unc_indptr", -1, 2**62)))


@case("artifact", "pda-vocab-lengths-65535", error="ArtifactFormatError", match=r"vocab\.")
def _():
    return load_bytes(tampered("pda", in_layout_3(array_set("vocab.lengths", 0, 65_535))))


@case("artifact", "pda-vocab-size-past-its-fingerprint", error="ArtifactFormatError",
      match=r"the vocabulary with its fingerprint")
def _():
    return load_bytes(tampered("pda", meta_set("vocab.size", 2**20)))


@case("artifact", "counted-bounds-2**31", error="ArtifactFormatError", match=r"metadata.counted.bounds")
def _():
    return load_bytes(tampered("counted", meta_set("counted.bounds", [[1, 2**31]])))


@case("artifact", "counted-bounds-2**31-1", error="ArtifactFormatError", match=r"more states than int32 ids")
def _():
    # the largest bound a counter may have, but its states (item states x bound) overflow int32
    return load_bytes(tampered("counted", meta_set("counted.bounds", [[1, 2**31 - 1]])))


@case("artifact", "counted-item-start-2**63-1", error="ArtifactFormatError", match=r"counter 0: item start")
def _():
    return load_bytes(tampered("counted", meta_set("counted.item_starts", [2**63 - 1])))


@case("artifact", "counted-call-kind-int32-max", error="ArtifactFormatError", match=r"array 'counted.call_kind': value 2147483647")
def _():
    return load_bytes(tampered("counted", array_set("counted.call_kind", 1, 2**31 - 1)))


@case("artifact", "counted-item-offset-2**62", error="ArtifactFormatError", match=r"counted.item_offset")
def _():
    return load_bytes(tampered("counted", array_set("counted.item_offset", -1, 2**62)))


@case("artifact", "counted-1M-counters", error="ArtifactFormatError", match=r"max_values")
def _():
    return load_bytes(tampered("counted", meta_set("counted.bounds", [[1, i + 2] for i in range(1 << 20)])))


# =========================================================================== load: the container


@case("container", "bomb-ratio", error="ArtifactFormatError", match=r"decompressed bytes from a \d+-byte payload, over max_compression_ratio")
def _():
    import msgpack

    body = msgpack.packb({"arrays": {"x": {"data": bytes(256 << 20), "dtype": "|u1", "shape": [256 << 20]}},
                          "meta": {}}, use_bin_type=True)
    return load_bytes(sign(body))


@case("container", "bomb-declared-2**40", error="ArtifactFormatError", match=r"prefix says 1099511627776 decompressed bytes, over max_payload_bytes")
def _():
    return load_bytes(sign(b"\x80", content_length=2**40))


@case("container", "bomb-frame-lies", error="ArtifactFormatError", match=r"zstd frame declares \d+ decompressed bytes, prefix says 1")
def _():
    import zstandard

    frame = zstandard.ZstdCompressor(write_checksum=True, write_content_size=True).compress(bytes(1 << 20))
    return load_bytes(sign(b"\x80", frame=frame, content_length=1))


@case("container", "bomb-unknown-size", error="ArtifactFormatError", match=r"does not record its decompressed size")
def _():
    import io

    import zstandard

    out = io.BytesIO()
    with zstandard.ZstdCompressor(write_checksum=True).stream_writer(out, closefd=False) as w:
        w.write(bytes(1 << 20))
    return load_bytes(sign(bytes(1 << 20), frame=out.getvalue(), content_length=1000))


@case("container", "payload-length-2**63", error="ArtifactFormatError", match=r"truncated: prefix says 9223372036854775808 payload bytes")
def _():
    return load_bytes(sign(b"\x80", payload_length=2**63))


@case("container", "msgpack-array-2**32-1", error="ArtifactFormatError", match=r"msgpack")
def _():
    return load_bytes(sign(b"\x82\xa6arrays\x80\xa4meta\xdd\xff\xff\xff\xff"))


@case("container", "msgpack-bin-4GiB-declared", error="ArtifactFormatError", match=r"msgpack")
def _():
    return load_bytes(sign(b"\x82\xa6arrays\x80\xa4meta\xc6\xff\xff\xff\xff" + bytes(16)))


@case("container", "msgpack-nested-100000", error="ArtifactFormatError", match=r"max_compression_ratio")
def _():
    return load_bytes(sign(b"\x82\xa6arrays\x80\xa4meta\x81\xa1k" + b"\x91" * 100_000 + b"\xc0"))


@case("container", "msgpack-nested-5000", error="ArtifactFormatError", match=r"msgpack|max_meta_depth")
def _():
    # within the compression ratio: the nesting itself must be refused
    return load_bytes(sign(b"\x82\xa6arrays\x80\xa4meta\x81\xa1k" + b"\x91" * 5_000 + b"\xc0"))


@case("container", "msgpack-5M-values", error="ArtifactFormatError", match=r"max_values")
def _():
    lists = b"".join(b"\xdd" + (1 << 20).to_bytes(4, "big") + bytes(b & 0x7F for b in os.urandom(1 << 20))
                     for _ in range(5))
    return load_bytes(sign(b"\x82\xa6arrays\x80\xa4meta\x81\xa1k\x95" + lists))


@case("container", "msgpack-ext-type", error="ArtifactFormatError", match=r"msgpack.*ext")
def _():
    return load_bytes(sign(b"\x82\xa6arrays\x80\xa4meta\x81\xa1k\xd4\x01\x00"))


@case("container", "65537-arrays", error="ArtifactFormatError", match=r"max_arrays|unexpected arrays")
def _():
    doc = document(base_artifact("dfa"))
    for i in range(65_537):
        doc["arrays"][f"x{i}"] = {"data": b"", "dtype": "|u1", "shape": [0]}
    return load_bytes(forged(doc))


@case("container", "truncated-every-length", ok=True)
def _():
    import gramc

    data = base_artifact("pda").to_bytes()
    for n in range(0, len(data), max(1, len(data) // 300)):
        try:
            gramc.from_bytes(data[:n])
        except gramc.ArtifactFormatError as err:
            assert "truncated" in str(err) or "shorter" in str(err), str(err)
        else:
            return n
    return True


# =========================================================================== runtime calls


def _matcher(kind: str):
    return base_artifact(kind).matcher()


def _words(shape: tuple[int, ...]) -> Any:
    import numpy as np

    return np.zeros(shape, np.int32)


def _call_cases() -> None:
    calls: list[tuple[str, Callable[[Any], Any], str | None, str, Any]] = [
        # (name, call on a matcher, error, match, ok)
        ("mask-size-2**40", lambda m: m.mask(size=2**40), "ValueError", r"mask size 1099511627776", None),
        ("mask-size-2**63", lambda m: m.mask(size=2**63), "ValueError", r"mask size 9223372036854775808", None),
        ("mask-size-minus-1", lambda m: m.mask(size=-1), "ValueError", r"mask size -1 is smaller", None),
        ("mask-size-float", lambda m: m.mask(size=9.0), "TypeError", r"mask size is an int", None),
        ("logits-mask-2**40", lambda m: m.logits_mask(2**40), "ValueError", r"mask size 1099511627776", None),
        ("commit-token-minus-1", lambda m: m.commit_token(-1), None, "", False),
        ("commit-token-2**64", lambda m: m.commit_token(2**64), None, "", False),
        ("commit-token-vocab-size", lambda m: m.commit_token(9), None, "", False),
        ("commit-token-none", lambda m: m.commit_token(None), "TypeError", r"a token id is an int, got None", None),
        ("commit-tokens-none", lambda m: m.commit_tokens(None), "TypeError", r"token ids.*NoneType", None),
        ("commit-tokens-int", lambda m: m.commit_tokens(5), "TypeError", r"token ids.*int", None),
        ("commit-tokens-str", lambda m: m.commit_tokens("ab"), "TypeError", r"token ids are an iterable of ints, got str", None),
        ("validate-tokens-none", lambda m: m.validate_tokens(None), "TypeError", r"token ids.*NoneType", None),
        ("commit-bytes-str", lambda m: m.commit_bytes("x"), "TypeError", r"commit_bytes takes bytes", None),
        ("fill-bitmask-list", lambda m: m.fill_bitmask([0]), "TypeError", r"numpy int32/uint32 array", None),
        ("fill-bitmask-2d", lambda m: m.fill_bitmask(_words((1, 1))), "ValueError",
         r"1-d int32/uint32", None),
        ("rollback-minus-1", lambda m: m.rollback(-1), "GramcError", r"cannot roll back -1", None),
        ("rollback-2**63", lambda m: m.rollback(2**63), "GramcError", r"cannot roll back 9223372036854775808", None),
        ("rollback-str", lambda m: m.rollback("1"), "TypeError", r"rollback", None),
    ]
    deep = 1 << 17
    calls += [("commit-bytes-128K-open", lambda m: m.commit_bytes(b"(" * deep), None, "", "pda"),
              ("commit-bytes-128K-then-close", lambda m: m.commit_bytes(b"(" * deep + b"x" + b")" * deep)
               and m.is_complete(), None, "", "pda")]
    for kind in ("dfa", "pda", "counted"):
        for name, call, error, match, ok in calls:
            if ok == "pda":  # a prefix of the language of the PDA, not of the others
                ok = kind == "pda"
            CASES.append(Case(f"call/{kind}-{name}", "call", lambda call=call, kind=kind: call(_matcher(kind)),
                              ok, error, match))


_call_cases()


@case("call", "from-bytes-str", error="TypeError", match=r"from_bytes takes bytes.*str")
def _():
    import gramc

    return gramc.from_bytes("GMSK")


@case("call", "from-bytes-none", error="TypeError", match=r"from_bytes takes bytes.*NoneType")
def _():
    import gramc

    return gramc.from_bytes(None)


@case("call", "load-directory", error="OSError", match=r"Is a directory|not a regular file")
def _():
    import gramc

    return gramc.load(tempfile.gettempdir())


@case("call", "load-dev-zero", error="ArtifactFormatError", match=r"/dev/zero: not a regular file")
def _():
    import gramc

    return gramc.load("/dev/zero")


@case("call", "compile-limits-str", error="TypeError", match=r"limits .*Limits.*str")
def _():
    import gramc

    return gramc.compile("a", limits="x")


@case("call", "compile-format-int", error="GramcError", match=r"unknown source format 5")
def _():
    import gramc

    return gramc.compile("a", format=5)


@case("call", "compile-vocab-int", error="VocabularyError", match=r"cannot load a vocabulary from int")
def _():
    import gramc

    return gramc.compile("a", vocab=5)


@case("call", "vocab-from-list-none", error="TypeError", match=r"tokens.*NoneType")
def _():
    import gramc

    return gramc.Vocab.from_list(None)


@case("call", "vocab-eos-out-of-range", error="VocabularyError", match=r"eos")
def _():
    import gramc

    return gramc.Vocab.from_list(["a"], eos_ids=[2**40])


@case("call", "bind-wrong-vocab", error="VocabularyError", match=r"vocabulary mismatch")
def _():
    import gramc

    return base_artifact("pda").bind(gramc.Vocab.from_list(["a", "b"]))


# =========================================================================== running a case


_CHILD = """
import json, resource, sys, time, traceback
resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))
sys.path.insert(0, {here!r})
import hostile_cases
out = hostile_cases.run_in_child(sys.argv[1])
print("HOSTILE-RESULT " + json.dumps(out))
"""


def run_in_child(name: str) -> dict:
    """Run case ``name`` here (in the child); what happened, as JSON-able values."""
    import gramc.errors as errors

    case = by_name()[name]
    try:
        value = case.run()
    except BaseException as err:  # noqa: BLE001 - the child reports whatever happened
        frames = traceback.extract_tb(err.__traceback__)
        where = frames[-1].filename if frames else ""
        return {"raised": type(err).__name__, "classes": [c.__name__ for c in type(err).__mro__],
                "message": str(err)[:2000], "from": where,
                "gramc": isinstance(err, errors.GramcError),
                "traceback": "".join(traceback.format_exception(err))[-3000:]}
    return {"value": _jsonable(value)}


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)[:500]


def judge(case: Case, outcome: dict) -> tuple[bool, str]:
    """Is ``outcome`` (of :func:`run_in_child`) a clean end of ``case``? And why not."""
    if "value" in outcome:
        if case.ok is not None and outcome["value"] == case.ok:
            return True, "ok"
        return False, f"returned {outcome['value']!r}, expected " + (
            f"{case.ok!r}" if case.ok is not None else f"{case.error}")
    raised = f"{outcome['raised']}: {outcome['message'][:300]}"
    if case.error is None or case.error not in outcome["classes"]:
        return False, f"raised {raised}"
    if "/gramc/" not in outcome["from"].replace(os.sep, "/"):
        return False, f"raised from {outcome['from']} (not gramc's own check): {raised}"
    if not re.search(case.match, outcome["message"]):
        return False, f"message does not match {case.match!r}: {raised}"
    return True, outcome["raised"]


def run_case(case: Case, artifacts: str | None = None) -> Result:
    """Run ``case`` in a child process under its caps; its :class:`Result` (``artifacts``:
    a folder of base artifacts from :func:`save_base_artifacts`)."""
    env = dict(os.environ, PYTHONPATH=str(SRC))
    if artifacts:
        env[_BASE_DIR] = artifacts
    code = _CHILD.format(memory=case.memory, here=str(HERE))
    with tempfile.TemporaryFile() as out:
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", code, case.name], stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=tempfile.gettempdir())
        timer = threading.Timer(case.wall, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    rss = usage.ru_maxrss * 1024  # kilobytes on Linux
    if wall >= case.wall:
        return Result(case.name, False, f"ran past {case.wall:.0f} s", wall, rss)
    lines = [line for line in text.splitlines() if line.startswith("HOSTILE-RESULT ")]
    if not lines:
        return Result(case.name, False, f"exit status {proc.returncode}: {text[-1500:]}", wall, rss)
    outcome = json.loads(lines[-1][len("HOSTILE-RESULT "):])
    clean, why = judge(case, outcome)
    return Result(case.name, clean, why, wall, rss, outcome)


def run_cases(cases: list[Case], workers: int = 2) -> dict[str, Result]:
    """Run ``cases`` with ``workers`` children at a time, longest families first."""
    with tempfile.TemporaryDirectory() as folder, ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        save_base_artifacts(folder)
        return {r.case: r for r in pool.map(lambda c: run_case(c, folder), cases)}


def save_base_artifacts(folder: str) -> None:
    """Compile the base artifacts once (in a capped child, as the cases) into ``folder``."""
    code = (f"import sys; sys.path.insert(0, {str(HERE)!r}); import hostile_cases as h\n"
            f"for kind in {sorted(_BASE_SOURCES)!r}: h.base_artifact(kind).save({folder!r} + '/' + kind + '.gmask')")
    subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(SRC)), check=True,
                   timeout=WALL_SECONDS)


def table(results: Iterable[Result]) -> str:
    """A markdown table per family: cases, clean, max wall time, max RSS; and the total."""
    rows: dict[str, list[Result]] = {}
    for r in results:
        rows.setdefault(by_name()[r.case].family, []).append(r)
    lines = ["| family | cases | clean | max wall (s) | max RSS (MiB) |", "|---|---:|---:|---:|---:|"]
    every: list[Result] = []
    for family, rs in rows.items():
        every += rs
        lines.append(_row(family, rs))
    lines.append(_row("**all**", every))
    return "\n".join(lines)


def _row(label: str, rs: list[Result]) -> str:
    return (f"| {label} | {len(rs)} | {sum(r.clean for r in rs)} | {max(r.wall for r in rs):.1f} "
            f"| {max(r.max_rss for r in rs) / 2**20:.0f} |")
