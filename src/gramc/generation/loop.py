"""The reference generation loop: any ``logits_fn(token_ids) -> scores``, masked every step.

Nothing here depends on a model library: ``logits_fn`` receives the full id sequence (prompt
plus what was generated so far, a list of ints) and returns one row of next-token scores of
any width (a numpy array, a list, or a torch tensor). The mask is applied in logit space:
tokens the grammar forbids become ``-inf`` before the sampler sees them, so every sampler
(greedy, temperature, top-k, top-p, beam search) only ever picks allowed tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from gramc.errors import GramcError, VocabularyError
from gramc.generation.lookahead import DEFAULT_DEPTH, check_lookahead, lookahead_sample
from gramc.generation.sampling import Sampler, as_row, candidates, log_softmax
from gramc.vocab import Vocab

#: Why a generation stopped.
STOP_REASONS = ("max_tokens", "stop_sequence", "eos", "no_valid_token")

LogitsFn = Callable[[list[int]], Any]


@dataclass
class GenerationResult:
    """One generated sequence.

    Attributes:
        tokens: the generated ids, prompt and end-of-sequence token excluded.
        data: the bytes those tokens spell (the whole output, stop sequence included).
        text: ``data`` decoded as UTF-8 (invalid bytes replaced), cut before the stop
            sequence when one stopped generation (unless ``include_stop``).
        stop_reason: ``"max_tokens"``, ``"stop_sequence"``, ``"eos"`` or ``"no_valid_token"``
            (the grammar, or the model's scores, left no token to choose).
        complete: the grammar accepts ``data`` as a whole output.
        eos_token: the end-of-sequence id that ended generation, else None.
        stop_sequence: the stop sequence (as given) that ended generation, else None.
        model_calls: calls of ``logits_fn`` (beam search: by the whole search).
        forced_tokens: tokens emitted by jump-forward, without a model call.
        sampled_tokens: tokens chosen from the model's scores (EOS included).
        logprob: sum of the chosen tokens' log-probabilities under the masked, renormalised
            distribution at temperature 1 (forced tokens count 0: the grammar allowed only them).
        score: the ranking score: ``logprob / length ** length_penalty`` for beam search,
            else ``logprob``.
        beams: beam search only: every returned hypothesis, best first (this one included).
    """

    tokens: list[int]
    data: bytes
    text: str
    stop_reason: str
    complete: bool
    eos_token: int | None = None
    stop_sequence: str | bytes | None = None
    model_calls: int = 0
    forced_tokens: int = 0
    sampled_tokens: int = 0
    logprob: float = 0.0
    score: float = 0.0
    beams: list["GenerationResult"] = field(default_factory=list, repr=False)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Step:
    """What :func:`generate` passes to its ``trace`` callback after each emitted token.

    ``token`` is None for a step that ended generation without a token; ``forced`` marks a
    jump-forward token; ``allowed`` is how many ids the mask allowed (0 for forced tokens);
    ``beam`` is the hypothesis index within the step (0 without beam search).
    """

    index: int
    token: int | None
    forced: bool
    allowed: int
    matcher: Any
    beam: int = 0


def generate(
    grammar: Any,
    logits_fn: LogitsFn,
    *,
    vocab: Vocab | str | None = None,
    prompt: Sequence[int] = (),
    max_tokens: int = 256,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | np.random.Generator | None = None,
    beam_size: int = 1,
    length_penalty: float = 1.0,
    stop: Iterable[str | bytes] | str | bytes = (),
    include_stop: bool = False,
    jump_forward: bool = True,
    finish: bool = False,
    lookahead: int | None = None,
    depth: int | None = None,
    lookahead_weighting: str = "model",
    trace: Callable[[Step], None] | None = None,
) -> GenerationResult:
    """Generate one constrained sequence (or, with ``beam_size > 1``, the best of a beam search).

    Args:
        grammar: a bound artifact (a fresh matcher is made) or a :class:`~gramc.Matcher`
            (used as is, so generation can continue from its state; beam search forks it).
        logits_fn: ``logits_fn(ids) -> scores``: ``ids`` is ``prompt`` plus the tokens
            generated so far; ``scores`` is one row of logits, as wide as the model's output
            (wider than the vocabulary is fine: the extra ids are never allowed).
        vocab: the vocabulary the artifact was bound to, for ``text`` and stop sequences;
            found automatically for bundled vocabularies and PDA and counted artifacts.
        prompt: ids passed to ``logits_fn`` before the generated ones (never masked).
        max_tokens: generate at most this many tokens; once there, generation stops
            (``stop_reason="max_tokens"``, even where the output is complete) without
            another model call. A final EOS is not part of ``tokens`` and not counted.
        temperature, top_k, top_p: the sampler (see :class:`~gramc.generation.Sampler`);
            ``temperature=0`` is greedy. Ignored by beam search.
        seed: an int or a numpy ``Generator`` for sampling; None draws fresh entropy.
        beam_size: more than 1 runs beam search; each hypothesis has its own matcher.
        length_penalty: beam scores are ``logprob / length ** length_penalty``.
        stop: stop sequences (str as UTF-8, or bytes): generation ends as soon as the output
            contains one.
        include_stop: keep the stop sequence (and what followed it in its token) in ``text``.
        jump_forward: when the grammar forces the next tokens, emit them without calling
            ``logits_fn`` (counted in ``forced_tokens``).
        finish: mask every step with the tokens left as a budget (``Matcher.mask(budget=)``),
            so the output is complete by ``max_tokens``: exactly for DFA artifacts, by a sound
            bound for PDA artifacts. The budget is the tokens left plus one for the final
            EOS where the vocabulary has one (``max_tokens`` does not count it). Where no
            completion fits (the budget allows nothing the plain mask allows), that step is
            masked as without ``finish``.
        lookahead: soft lookahead (:mod:`gramc.generation.lookahead`): at each sampled step,
            score the ``lookahead`` most likely allowed tokens by what follows them and
            sample from the reweighted distribution. Rollout calls count in ``model_calls``.
        depth: how many tokens lookahead looks past a candidate (default 4; 0: plain
            top-K sampling).
        lookahead_weighting: ``"model"`` (a greedy constrained model rollout: the path's
            joint log-probability) or ``"count"`` (the number of ways to continue within
            ``depth`` tokens; no model calls).
        trace: called with a :class:`Step` after every token (for debugging).

    End-of-sequence ids are allowed exactly where the grammar is complete; choosing one ends
    generation (``stop_reason="eos"``) and is not part of ``tokens``. When only EOS is allowed
    and ``jump_forward`` is on, generation ends without a model call.
    """
    if max_tokens < 0:
        raise ValueError("max_tokens must be >= 0")
    if beam_size < 1:
        raise ValueError("beam_size must be >= 1")
    check_lookahead(lookahead, depth, lookahead_weighting, beam_size)
    matcher = grammar.matcher(max_rollback=0) if hasattr(grammar, "matcher") else grammar
    stops = _stop_list(stop)
    token_bytes = resolve_token_bytes(matcher, vocab, required=bool(stops))
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    run = _Run(matcher, logits_fn, list(prompt), token_bytes, stops, include_stop,
               jump_forward, max_tokens, trace, finish)
    if beam_size > 1:
        return run.beam_search(beam_size, length_penalty)
    if lookahead is not None:
        return lookahead_sample(run, Sampler(temperature, top_k, top_p), rng, int(lookahead),
                                DEFAULT_DEPTH if depth is None else int(depth), lookahead_weighting)
    return run.sample(Sampler(temperature, top_k, top_p), rng)


def resolve_token_bytes(matcher: Any, vocab: Vocab | str | None, required: bool = False):
    """The bytes of every token id of ``matcher``'s artifact, or None when unknown.

    ``vocab`` wins; else the artifact's recorded vocabulary when it loads by name (bundled
    vocabularies) with the recorded fingerprint; else the token bytes of the vocabulary a PDA
    or counted artifact's token table holds (the one it was loaded or bound with).
    """
    from gramc.vocab import load_vocab

    artifact = getattr(matcher, "_artifact", None)
    info = getattr(artifact, "vocab", None)
    if vocab is not None:
        vocab = load_vocab(vocab)
        if info is not None and vocab.fingerprint != info.fingerprint:
            raise VocabularyError(
                f"vocabulary {vocab.name!r} is not the one the artifact was bound to ({info.name!r})"
            )
        return vocab.tokens
    if info is not None:
        try:
            found = load_vocab(info.name)
            if found.fingerprint == info.fingerprint:
                return found.tokens
        except (GramcError, OSError):
            pass
        table = getattr(artifact, "_table", None)
        stored = getattr(table, "token_bytes", None)
        if stored is not None:
            return stored
    if required:
        raise VocabularyError("stop sequences need the token bytes: pass vocab= to generate()")
    return None


def _stop_list(stop) -> list[tuple[bytes, str | bytes]]:
    if isinstance(stop, (str, bytes)):
        stop = [stop]
    out = []
    for s in stop:
        b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
        if not b:
            raise ValueError("a stop sequence must not be empty")
        out.append((b, s))
    return out


def _find_stop(stops, data: bytes, new_from: int) -> tuple[int, str | bytes] | None:
    """The earliest stop sequence that ends inside ``data[new_from:]``: (offset, stop)."""
    best = None
    for b, s in stops:
        i = data.find(b, max(0, new_from - len(b) + 1))
        if i >= 0 and (best is None or i < best[0]):
            best = (i, s)
    return best


class _Hyp:
    """One sequence being generated: its matcher, tokens, bytes and counters."""

    __slots__ = ("m", "tokens", "data", "logprob", "calls", "forced", "sampled", "reason",
                 "eos", "stop_at", "stop_seq")

    def __init__(self, m, tokens=None, data=b"", logprob=0.0, calls=0, forced=0, sampled=0):
        self.m, self.tokens, self.data = m, tokens or [], data
        self.logprob, self.calls, self.forced, self.sampled = logprob, calls, forced, sampled
        self.reason = self.eos = self.stop_at = self.stop_seq = None

    def child(self, token: int, lp: float, token_bytes) -> "_Hyp":
        m = self.m.fork()
        if not m.commit_token(token):
            raise GramcError(f"internal error: the matcher refused allowed token {token}")
        return _Hyp(m, self.tokens + [token], self.data + _bytes(token_bytes, token),
                    self.logprob + lp, self.calls, self.forced, self.sampled + 1)


def _bytes(token_bytes, t: int) -> bytes:
    return token_bytes[t] if token_bytes is not None else b""


class _Run:
    def __init__(self, matcher, logits_fn, prompt, token_bytes, stops, include_stop,
                 jump_forward, max_tokens, trace, finish=False):
        self.m0 = matcher
        self.logits_fn = logits_fn
        self.prompt = prompt
        self.token_bytes = token_bytes
        self.stops = stops
        self.include_stop = include_stop
        self.jump_forward = jump_forward
        self.max_tokens = max_tokens
        self.trace = trace
        self.eos = frozenset(matcher._eos)
        self.finish = finish
        self.calls = 0

    # ------------------------------------------------------------ shared steps

    def _append(self, h: _Hyp, token: int, forced: bool, allowed: int, beam: int = 0) -> bool:
        """Commit ``token`` to ``h`` in place; True when a stop sequence now ends it."""
        if not h.m.commit_token(token):
            raise GramcError(f"internal error: the matcher refused allowed token {token}")
        before = len(h.data)
        h.tokens.append(token)
        h.data += _bytes(self.token_bytes, token)
        if self.trace:
            self.trace(Step(len(h.tokens) - 1, token, forced, allowed, h.m, beam))
        if self.stops:
            hit = _find_stop(self.stops, h.data, before)
            if hit is not None:
                h.reason, (h.stop_at, h.stop_seq) = "stop_sequence", hit
                return True
        return False

    def _budget(self, h: _Hyp) -> int | None:
        """With ``finish``: the tokens ``h`` may still commit, its final EOS included."""
        if not self.finish:
            return None
        return self.max_tokens - len(h.tokens) + (1 if self.eos else 0)

    def _mask(self, h: _Hyp, width: int) -> np.ndarray:
        """``h``'s mask for logits of ``width``: cut to its budget with ``finish``, unless
        that leaves nothing the plain mask allows (no completion fits: see generate)."""
        budget = self._budget(h)
        if budget is not None:
            cut = h.m.logits_mask(width, budget=budget)
            if cut.any() or not h.m.logits_mask(width).any():
                return cut
        return h.m.logits_mask(width)

    def _fits(self, h: _Hyp, token: int) -> bool:
        """May ``h`` take the forced ``token`` within its budget (always without ``finish``)?
        The forced string's greedy tokens may be more than the fewest."""
        budget = self._budget(h)
        return budget is None or bool(self._mask(h, h.m.vocab_size)[token])

    def _advance_forced(self, h: _Hyp, beam: int = 0) -> bool:
        """Jump-forward: emit the forced tokens, and end ``h`` when only EOS may follow.

        Returns True when ``h`` has ended.
        """
        if not self.jump_forward:
            return False
        forced = h.m.forced_tokens()
        for t in forced[: self.max_tokens - len(h.tokens)]:
            if not self._fits(h, t):
                break
            h.forced += 1
            if self._append(h, t, True, 0, beam):
                return True
        if len(h.tokens) >= self.max_tokens:
            return False
        if h.m.is_complete() and self.eos:
            allowed = h.m.allowed_tokens()
            if len(allowed) and all(int(t) in self.eos for t in allowed):
                h.reason, h.eos = "eos", int(allowed[0])
                h.m.commit_token(h.eos)
                if self.trace:
                    self.trace(Step(len(h.tokens), h.eos, True, 0, h.m, beam))
                return True
        return False

    def _scores(self, h: _Hyp) -> tuple[np.ndarray, np.ndarray]:
        """Call the model for ``h``; the allowed candidates and their scores."""
        h.calls += 1
        self.calls += 1
        row = as_row(self.logits_fn(self.prompt + h.tokens))
        return candidates(row, self._mask(h, row.shape[0]))

    def _result(self, h: _Hyp, score: float | None = None) -> GenerationResult:
        data = bytes(h.data)
        cut = data
        if h.reason == "stop_sequence" and not self.include_stop:
            cut = data[: h.stop_at]
        return GenerationResult(
            tokens=list(h.tokens), data=data, text=cut.decode("utf-8", "replace"),
            stop_reason=h.reason, complete=h.m.is_complete(), eos_token=h.eos,
            stop_sequence=h.stop_seq, model_calls=h.calls, forced_tokens=h.forced,
            sampled_tokens=h.sampled, logprob=float(h.logprob),
            score=float(h.logprob if score is None else score))

    # ------------------------------------------------------------ sampling

    def sample(self, sampler: Sampler, rng: np.random.Generator) -> GenerationResult:
        h = _Hyp(self.m0)
        while self._ready(h):
            ids, vals = self._scores(h)
            if not len(ids):
                h.reason = "no_valid_token"
                break
            i = sampler.choose(ids, vals, rng)
            token = int(ids[i])
            h.logprob += float(log_softmax(vals)[i])
            h.sampled += 1
            if self._take(h, token, len(ids)):
                break
        return self._result(h)

    def _ready(self, h: _Hyp) -> bool:
        """Emit the forced tokens; True when ``h`` now needs a chosen token, False when it
        has ended (``h.reason`` says why)."""
        if h.reason is not None:
            return False  # the last token ended it (a stop sequence)
        if len(h.tokens) < self.max_tokens and self._advance_forced(h):
            return False  # ended by a forced stop sequence or EOS
        if len(h.tokens) >= self.max_tokens:
            h.reason = "max_tokens"
        elif h.m.is_finished():
            h.reason = "no_valid_token"
        else:
            return True
        return False

    def _take(self, h: _Hyp, token: int, allowed: int) -> bool:
        """Commit the chosen ``token`` (of ``allowed`` ids); True when it was EOS and ended ``h``."""
        if token in self.eos:
            h.m.commit_token(token)
            h.reason, h.eos = "eos", token
            if self.trace:
                self.trace(Step(len(h.tokens), token, False, allowed, h.m))
            return True
        self._append(h, token, False, allowed)
        return False

    # ------------------------------------------------------------ beam search

    def beam_search(self, beam_size: int, length_penalty: float) -> GenerationResult:
        def norm(h: _Hyp) -> float:
            length = len(h.tokens) + (h.eos is not None)
            return h.logprob / (max(length, 1) ** length_penalty)

        live = [_Hyp(self.m0.fork())]
        done: list[_Hyp] = []
        while live:
            cands: list[tuple[float, int, int, _Hyp]] = []
            for b, h in enumerate(live):
                if len(h.tokens) >= self.max_tokens:
                    h.reason = "max_tokens"
                elif not self._advance_forced(h, b):
                    if len(h.tokens) >= self.max_tokens:
                        h.reason = "max_tokens"
                    elif h.m.is_finished():
                        h.reason = "no_valid_token"
                    else:
                        ids, vals = self._scores(h)
                        if not len(ids):
                            h.reason = "no_valid_token"
                        else:
                            lp = log_softmax(vals)
                            top = np.argsort(-lp, kind="stable")[: 2 * beam_size]
                            cands.extend((h.logprob + lp[i], int(ids[i]), b, h) for i in top)
                if h.reason is not None:
                    done.append(h)  # a dead end or a stop still competes in the final ranking
            cands.sort(key=lambda c: -c[0])
            nxt: list[_Hyp] = []
            for total, token, _b, h in cands:
                if token in self.eos:
                    e = _Hyp(h.m.fork(), list(h.tokens), h.data, total, h.calls, h.forced,
                             h.sampled + 1)
                    e.m.commit_token(token)
                    e.reason, e.eos = "eos", token
                    done.append(e)
                    continue
                c = h.child(token, total - h.logprob, self.token_bytes)
                before = len(h.data)
                if self.trace:
                    self.trace(Step(len(c.tokens) - 1, token, False, 0, c.m, len(nxt)))
                hit = _find_stop(self.stops, c.data, before) if self.stops else None
                if hit is not None:
                    c.reason, (c.stop_at, c.stop_seq) = "stop_sequence", hit
                    done.append(c)
                    continue
                nxt.append(c)
                if len(nxt) == beam_size:
                    break
            live = nxt
            # Stop once beam_size hypotheses are finished and no live one can still beat the
            # worst of them (transformers' heuristic: live scores are judged at their length).
            if len(done) >= beam_size and live:
                worst = sorted((norm(h) for h in done), reverse=True)[beam_size - 1]
                if max(norm(h) for h in live) < worst:
                    break
        for h in live:
            h.reason = h.reason or "max_tokens"
            done.append(h)
        ranked = sorted(done, key=norm, reverse=True)[:beam_size]
        results = [self._result(h, norm(h)) for h in ranked]
        for r in results:
            r.model_calls = self.calls  # the whole search's calls, not one lineage's
        results[0].beams = results
        return results[0]
