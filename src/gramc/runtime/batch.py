"""Batched matching for continuous batching: one call per step for the whole batch.

A :class:`BatchMatcher` holds up to ``capacity`` requests, each in a slot, each with its own
artifact (requests may use different artifacts, as long as they share the vocabulary). Per
decoding step a server makes three calls: :meth:`~BatchMatcher.fill_masks` (packed masks, see
:mod:`gramc.bitmask`) or :meth:`~BatchMatcher.apply_masks` (-inf into the logits in
place), then :meth:`~BatchMatcher.commit` with the sampled tokens.

Rows: by default the batch's rows are its requests in ascending slot order
(:attr:`~BatchMatcher.request_ids`); every per-step call also takes ``request_ids`` to name the
rows explicitly. An output or logits array with ``capacity`` rows is indexed by slot instead.

DFA requests are vectorised per artifact (one fancy index gathers the mask rows, one
searchsorted advances the states); PDA requests keep a per-row
:class:`~gramc.runtime.matcher.Matcher`. With ``device="cuda"`` the DFA states live on the
GPU and the kernels of :mod:`gramc.runtime.cuda` gather masks and advance states there;
PDA masks are still computed on the CPU and uploaded once per step.

Token budgets (``budgets=`` of :meth:`~BatchMatcher.fill_masks` and
:meth:`~BatchMatcher.apply_masks`, one per row, None for none) cut each budgeted row as
``Matcher.mask(budget=n)`` does (:mod:`gramc.runtime.budget`). The budgeted rows are computed
on the host, on both paths: on the device path they replace those rows after the kernels
(``fill_masks``) or are applied after them (``apply_masks``: a budget row allows a subset of
the plain row), at the price of downloading the DFA states once per call that has a budget.

Example:

>>> import numpy as np, gramc
>>> vocab = gramc.Vocab.from_list([b"a", b"b", b"ab", b"<eos>"], special_ids=[3], eos_ids=[3])
>>> batch = BatchMatcher(gramc.compile("(ab)+", vocab=vocab), capacity=4)
>>> batch.add("r1"), batch.add("r2")
(0, 1)
>>> batch.commit({"r1": 2}).tolist()          # r1 takes "ab"
[True]
>>> logits = np.zeros((2, 6), dtype=np.float32)  # logits may be wider than the vocabulary
>>> batch.apply_masks(logits)
>>> (logits == 0).astype(int).tolist()        # r1: a, ab or EOS; r2: a or ab
[[1, 0, 1, 1, 0, 0], [1, 0, 1, 0, 0, 0]]
>>> batch.commit([3, 1]).tolist()             # r1 ends with EOS; "b" is refused for r2
[True, False]
>>> batch.is_finished("r1")
True
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Hashable, Iterable

import numpy as np

from gramc.errors import GramcError, LimitExceededError, VocabularyError
from gramc.bitmask import n_words
from gramc.runtime.budget import budget_of, check_budget
from gramc.runtime.cuda.tables import DFAArrays

if TYPE_CHECKING:
    from gramc.runtime.cuda.engine import RowMaps

#: The state of a request that has committed end-of-sequence.
ENDED = -1


@dataclass(eq=False)
class _Entry:
    """One artifact of the batch: its kind and, for a DFA, its arrays."""

    artifact: Any
    arrays: DFAArrays | None  # None for PDA artifacts
    device_index: int = -1  # index in the device tables (DFA, device path)


@dataclass(eq=False)
class _Plan:
    """How the rows of one call map to slots, split by kind (cached per batch version); the
    device engine reads it as its :class:`~gramc.runtime.cuda.engine.RowMaps`."""

    slots: np.ndarray  # int32 [n]: slot of each row
    groups: list[tuple[int, np.ndarray, np.ndarray]]  # DFA: (entry, positions, slots)
    dfa_pos: np.ndarray
    dfa_slots: np.ndarray
    pda_pos: np.ndarray
    pda_slots: np.ndarray
    version: int = -1  # the batch version it was made for
    device: dict[str, Any] = field(default_factory=dict)  # device copies of the maps


class BatchMatcher:
    """Masks and commits for a whole batch of requests, vectorised.

    Args:
        artifacts: one bound artifact (DFA or PDA) or a sequence of them; the first is the
            default of :meth:`add`. More can be given to :meth:`add` later.
        capacity: requests held at most.
        device: ``"cpu"`` (numpy), ``"cuda"`` (PyCUDA; raises
            :class:`~gramc.errors.BackendUnavailableError` when PyCUDA, the driver or a device
            is missing), or a :class:`gramc.runtime.cuda.device.Backend` object (the tests
            pass the host emulation).
        dense_budget: device path only: bytes of dense next-state table per artifact, beyond
            which states advance by binary search.

    Raises:
        VocabularyError: the artifacts are not bound to one vocabulary.
    """

    def __init__(self, artifacts: Any, capacity: int, device: Any = "cpu", *,
                 dense_budget: int | None = None):
        if capacity < 1:
            raise GramcError(f"capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.vocab_size: int | None = None
        self._vocab: Any = None
        self._entries: list[_Entry] = []
        self._entry_of: dict[int, int] = {}
        self._slot_of: dict[Hashable, int] = {}
        self._rid: list[Hashable | None] = [None] * self.capacity
        self._free = list(range(self.capacity))
        self._entry = np.full(self.capacity, -1, dtype=np.int32)  # entry index per slot
        self._state = np.zeros(self.capacity, dtype=np.int32)  # DFA state per slot (CPU path)
        self._matchers: list[Any] = [None] * self.capacity  # PDA matcher per slot
        self._version = 0
        self._plans: dict[Any, _Plan] = {}
        self._engine = None
        if device != "cpu":
            from gramc.runtime.cuda.engine import DeviceEngine

            self._engine = DeviceEngine(device, self.capacity, dense_budget)
        self.device = "cpu" if self._engine is None else self._engine.backend.name
        arts = list(artifacts) if isinstance(artifacts, (list, tuple)) else [artifacts]
        for art in arts:
            self._register(art)

    # ------------------------------------------------------------ artifacts

    def _register(self, artifact: Any) -> int:
        index = self._entry_of.get(id(artifact))
        if index is not None:
            return index
        _ = artifact.token_table  # VocabularyError for an unbound artifact
        self._check_vocab(artifact)
        arrays = DFAArrays.of(artifact) if artifact.kind == "dfa" and not artifact.has_unique else None
        entry = _Entry(artifact, arrays)
        if self._engine is not None and arrays is not None:
            entry.device_index = self._engine.add_table(arrays)
        self._entries.append(entry)
        self._entry_of[id(artifact)] = len(self._entries) - 1
        return len(self._entries) - 1

    def _check_vocab(self, artifact: Any) -> None:
        info = artifact.vocab
        if self._vocab is None:
            self._vocab, self.vocab_size = info, int(info.size)
            if self._engine is not None:
                self._engine.set_width(n_words(self.vocab_size))
            return
        if info.size != self.vocab_size:
            raise VocabularyError(
                f"vocabulary width mismatch: this batch holds artifacts over {self.vocab_size} "
                f"tokens ({self._vocab.name!r}), the new one is over {info.size} ({info.name!r})"
            )
        if info.fingerprint != self._vocab.fingerprint:
            raise VocabularyError(
                f"vocabulary mismatch: the batch's artifacts are bound to {self._vocab.name!r}, "
                f"the new one to {info.name!r} (same size, different tokens)"
            )

    @property
    def n_words(self) -> int:
        """Words per packed mask row."""
        return n_words(self.vocab_size or 0)

    # ------------------------------------------------------------ requests

    def add(self, request_id: Hashable, artifact: Any = None) -> int:
        """Start a request at the beginning of ``artifact`` (default: the first one given).

        Returns the request's slot (the lowest free one).

        Raises:
            GramcError: the id is already in the batch, or no artifact was ever given.
            LimitExceededError: the batch is full (``batch_capacity``).
        """
        if request_id in self._slot_of:
            raise GramcError(f"request id {request_id!r} is already in the batch")
        if artifact is None:
            if not self._entries:
                raise GramcError("add() needs an artifact: none was given to the batch")
            index = 0
        else:
            index = self._register(artifact)
        if not self._free:
            raise LimitExceededError("batch_capacity", len(self._slot_of) + 1, self.capacity,
                                     "evict a finished request first")
        slot = heapq.heappop(self._free)
        self._slot_of[request_id] = slot
        self._rid[slot] = request_id
        self._entry[slot] = index
        self._start(slot)
        self._version += 1
        return slot

    def evict(self, request_id: Hashable) -> None:
        """Remove a request; its slot is free for the next :meth:`add`."""
        slot = self.slot(request_id)
        del self._slot_of[request_id]
        self._rid[slot] = None
        self._entry[slot] = -1
        self._matchers[slot] = None
        heapq.heappush(self._free, slot)
        self._version += 1

    def reset(self, request_id: Hashable) -> None:
        """Back to the start of the request's artifact."""
        self._start(self.slot(request_id))

    def _start(self, slot: int) -> None:
        entry = self._entries[self._entry[slot]]
        if entry.arrays is None:
            self._matchers[slot] = entry.artifact.matcher(max_rollback=0)
            return
        self._matchers[slot] = None
        self._state[slot] = entry.arrays.start
        if self._engine is not None:
            self._engine.set_slot(slot, entry.arrays.start, entry.device_index)

    def slot(self, request_id: Hashable) -> int:
        """The slot of a request.

        Raises:
            GramcError: unknown request id.
        """
        try:
            return self._slot_of[request_id]
        except (KeyError, TypeError):
            raise GramcError(f"unknown request id {request_id!r}") from None

    @property
    def request_ids(self) -> list[Hashable]:
        """The requests in the default row order (ascending slot)."""
        return [self._rid[s] for s in np.flatnonzero(self._entry >= 0)]

    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, request_id: Hashable) -> bool:
        return request_id in self._slot_of

    # ------------------------------------------------------------ rows

    def _plan(self, request_ids: Iterable[Hashable] | None) -> _Plan:
        key = None if request_ids is None else tuple(request_ids)
        plan = self._plans.get(key)
        if plan is not None and plan.version == self._version:
            return plan
        if key is None:
            slots = np.flatnonzero(self._entry >= 0).astype(np.int32)
        else:
            slots = np.array([self.slot(r) for r in key], dtype=np.int32)
            if len(np.unique(slots)) != len(slots):
                raise GramcError("request_ids names a request more than once")
        plan = self._make_plan(slots)
        plan.version = self._version
        if len(self._plans) > 8:
            self._plans.clear()
        self._plans[key] = plan
        return plan

    def _make_plan(self, slots: np.ndarray) -> _Plan:
        entries = self._entry[slots]
        is_pda = np.array([self._entries[e].arrays is None for e in range(len(self._entries))],
                          dtype=bool)[entries] if len(slots) else np.zeros(0, bool)
        dfa_pos = np.flatnonzero(~is_pda).astype(np.int32)
        pda_pos = np.flatnonzero(is_pda).astype(np.int32)
        groups = []
        for e in np.unique(entries[dfa_pos]):
            pos = dfa_pos[entries[dfa_pos] == e]
            groups.append((int(e), pos, slots[pos]))
        return _Plan(slots, groups, dfa_pos, slots[dfa_pos], pda_pos, slots[pda_pos])

    def _host_side(self, cut: tuple[np.ndarray, list[int]] | None = None) -> Any:
        """The callbacks the device engine needs for the work that stays on the host
        (``cut``: the budgeted rows of this call, see :meth:`_budgets`)."""
        from gramc.runtime.cuda.engine import HostSide

        rows = None if cut is None else (lambda plan: self._budget_masks(plan, cut))
        return HostSide(by_slot=self._targets, fill_pda=self._fill_pda,
                        commit_pda=self._commit_pda, host_tokens=_host_tokens, budget_rows=rows)

    def _targets(self, n_rows: int, plan: RowMaps, what: str) -> bool:
        """Whether an array of ``n_rows`` rows is indexed by slot (else by row position)."""
        if n_rows == len(plan.slots):
            return False
        if n_rows == self.capacity:
            return True
        raise GramcError(f"{what} has {n_rows} rows: expected {len(plan.slots)} (one per request) "
                         f"or {self.capacity} (one per slot)")

    # ------------------------------------------------------------ masks

    def fill_masks(self, out: Any = None, request_ids: Iterable[Hashable] | None = None, *,
                   budgets: Any = None) -> Any:
        """The packed mask of every row (uint32 ``[n, n_words]``, see :mod:`gramc.bitmask`).

        Args:
            out: an int32/uint32 array of ``n`` rows (one per row) or ``capacity`` rows (one
                per slot; other rows are left as they are), at least ``n_words`` wide (extra
                words are zeroed). A device array on the device path.
            request_ids: the rows, in order (default: :attr:`request_ids`).
            budgets: token budgets, as ``Matcher.mask(budget=)`` takes them: one per row
                (None: no budget for that row), or ``{request_id: budget}`` (the requests not
                named have none). Default: no budgets.

        Returns:
            ``out``, or a new array (a device array on the device path).

        Raises:
            GramcError: ``budgets`` has not one entry per row, or names a request not in
                the rows.
            TypeError / ValueError: a budget is not an int >= 0.
        """
        plan = self._plan(request_ids)
        cut = self._budgets(plan, budgets)
        if self._engine is not None:
            return self._engine.fill_masks(plan, out, self._host_side(cut))
        n, W = len(plan.slots), self.n_words
        if out is None:
            out = np.empty((n, W), dtype=np.uint32)
        _check_mask_array(out, W)
        by_slot = self._targets(out.shape[0], plan, "out")
        self._fill_rows(out, plan, by_slot)
        if cut is not None:
            pos, masks = self._budget_masks(plan, cut)
            out[plan.slots[pos] if by_slot else pos, :W] = masks.view(out.dtype)
        return out

    def _budgets(self, plan: _Plan, budgets: Any) -> tuple[np.ndarray, list[int]] | None:
        """The budgeted rows of a call: (their positions, their budgets), or None for none."""
        if budgets is None:
            return None
        n = len(plan.slots)
        if isinstance(budgets, dict):
            at = {int(s): p for p, s in enumerate(plan.slots.tolist())}
            pairs = []
            for rid, b in budgets.items():
                p = at.get(self.slot(rid))
                if p is None:
                    raise GramcError(f"budgets names request {rid!r}, which is not one of this call's rows")
                pairs.append((p, b))
        else:
            values = list(budgets)
            if len(values) != n:
                raise GramcError(f"got {len(values)} budgets for {n} rows (one per row, None for none)")
            pairs = list(enumerate(values))
        pairs = sorted((p, check_budget(b)) for p, b in pairs if b is not None)
        if not pairs:
            return None
        return np.array([p for p, _ in pairs], dtype=np.int32), [b for _, b in pairs]

    def _budget_masks(self, plan: RowMaps, cut: tuple[np.ndarray, list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """The budgeted rows' packed masks (uint32 ``[k, n_words]``), as a per-row matcher
        gives them with its budget; with their positions."""
        pos, values = cut
        masks = np.zeros((len(pos), self.n_words), dtype=np.uint32)
        states = None
        for i, (p, n) in enumerate(zip(pos.tolist(), values)):
            slot = int(plan.slots[p])
            entry = self._entries[self._entry[slot]]
            if entry.arrays is None:
                self._matchers[slot].fill_bitmask(masks[i], budget=n)
                continue
            if states is None:
                states = self._state if self._engine is None else self._engine.states()
            if states[slot] != ENDED:
                masks[i] = budget_of(entry.artifact.token_table).words(int(states[slot]), n)
        return pos, masks

    def _fill_rows(self, out: np.ndarray, plan: _Plan, by_slot: bool) -> None:
        """The numpy reference of kernel ``gramc_dfa_fill_bitmask``, plus the PDA rows."""
        W = self.n_words
        words_out = out if out.shape[1] == W else out[:, :W]
        if out.shape[1] > W:
            out[plan.slots if by_slot else np.arange(len(plan.slots)), W:] = 0
        for e, pos, slots in plan.groups:
            rows = slots if by_slot else pos
            states = np.maximum(self._state[slots], 0)  # ENDED reads the dead state's empty row
            arrays = self._entries[e].arrays
            assert arrays is not None  # the groups are the DFA rows'
            words = arrays.words
            if not by_slot and len(pos) == len(out) and out.shape[1] == W and out.dtype == np.uint32:
                np.take(words, states, axis=0, out=out)  # one group, every row: no temporary
            else:
                words_out[rows] = words[states].view(out.dtype)
        self._fill_pda(plan, out, plan.pda_slots if by_slot else plan.pda_pos)

    def _fill_pda(self, plan: RowMaps, out: np.ndarray, rows: np.ndarray | None = None) -> None:
        """The PDA rows' masks into ``out[rows]`` (default: ``out[:k]``, in order)."""
        targets = range(len(plan.pda_slots)) if rows is None else rows.tolist()
        for row, slot in zip(targets, plan.pda_slots.tolist()):
            self._matchers[slot].fill_bitmask(out[row])

    def apply_masks(self, logits: Any, request_ids: Iterable[Hashable] | None = None, *,
                    budgets: Any = None) -> None:
        """Set the disallowed logits of every row to -inf, in place.

        Args:
            logits: float32/float16 numpy arrays, or torch tensors (any float dtype, bfloat16
                too) of ``n`` rows (one per row) or ``capacity`` rows (one per slot); columns
                past the vocabulary are disallowed. On the device path: a CUDA tensor or array.
            request_ids: the rows, in order (default: :attr:`request_ids`).
            budgets: token budgets, as for :meth:`fill_masks`.
        """
        plan = self._plan(request_ids)
        cut = self._budgets(plan, budgets)
        if self._engine is not None:
            self._engine.apply_masks(plan, logits, self._host_side(cut))
            return
        squeeze = getattr(logits, "ndim", 2) == 1
        matrix = logits[None] if squeeze else logits
        rows = plan.slots if self._targets(matrix.shape[0], plan, "logits") else None
        masks = np.empty((len(plan.slots), self.n_words), dtype=np.uint32)
        self._fill_rows(masks, plan, by_slot=False)
        if cut is not None:
            pos, budgeted = self._budget_masks(plan, cut)
            masks[pos] = budgeted
        apply_packed(matrix, masks, rows)

    # ------------------------------------------------------------ commits

    def commit(self, tokens: Any, request_ids: Iterable[Hashable] | None = None, *,
               wait: bool = True) -> np.ndarray | None:
        """Advance every row by its sampled token.

        Args:
            tokens: ``{request_id: token}`` (those requests only, in that order), or integers
                aligned with the rows (a list, numpy array, torch tensor; on the device path
                also a CUDA tensor/array, read on the device).
            request_ids: the rows ``tokens`` is aligned with (default: :attr:`request_ids`).
            wait: device path only: False returns None at once, leaving the flags on the
                device (no host round trip; see :meth:`last_accepted`).

        Returns:
            bool per row: False where the token was refused (that request's state is
            unchanged). EOS is accepted where the output is complete, and ends the request.
        """
        if isinstance(tokens, dict):
            request_ids = list(tokens)
            tokens = np.fromiter(tokens.values(), dtype=np.int64, count=len(tokens))
        plan = self._plan(request_ids)
        if self._engine is not None:
            return self._engine.commit(plan, tokens, wait, self._host_side())
        toks = _host_tokens(tokens, len(plan.slots))
        accepted = np.zeros(len(plan.slots), dtype=bool)
        for e, pos, slots in plan.groups:
            arrays = self._entries[e].arrays
            assert arrays is not None  # the groups are the DFA rows'
            accepted[pos] = advance_states(arrays, self._state, slots, toks[pos])
        accepted[plan.pda_pos] = self._commit_pda(plan, toks)
        return accepted

    def _commit_pda(self, plan: RowMaps, toks: np.ndarray) -> np.ndarray:
        """Commit the PDA rows' tokens (``toks``: one per row); their accepted flags, in order."""
        return np.array([self._matchers[slot].commit_token(int(toks[pos]))
                         for pos, slot in zip(plan.pda_pos.tolist(), plan.pda_slots.tolist())],
                        dtype=bool)

    def last_accepted(self) -> np.ndarray | None:
        """Device path: the flags of the last ``commit(..., wait=False)`` (waits for them)."""
        return None if self._engine is None else self._engine.last_accepted()

    # ------------------------------------------------------------ queries

    def dfa_state(self, request_id: Hashable) -> int | None:
        """A DFA request's state (-1 once it committed EOS), or None for a PDA request."""
        slot = self.slot(request_id)
        if self._entries[self._entry[slot]].arrays is None:
            return None
        states = self._state if self._engine is None else self._engine.states()
        return int(states[slot])

    def is_complete(self, request_id: Hashable) -> bool:
        """Could the request stop here (its output is in the language, or it ended)?"""
        slot = self.slot(request_id)
        entry = self._entries[self._entry[slot]]
        if entry.arrays is None:
            return self._matchers[slot].is_complete()
        state = self.dfa_state(request_id)
        return state == ENDED or bool(entry.arrays.accept[state])

    def is_finished(self, request_id: Hashable) -> bool:
        """True once the request committed EOS, or when no token at all is allowed."""
        slot = self.slot(request_id)
        entry = self._entries[self._entry[slot]]
        if entry.arrays is None:
            return self._matchers[slot].is_finished()
        state = self.dfa_state(request_id)
        return state == ENDED or not entry.arrays.words[state].any()

    def __repr__(self) -> str:
        return (f"<BatchMatcher {len(self)}/{self.capacity} requests, "
                f"{len(self._entries)} artifact(s), device={self.device}>")


# ---------------------------------------------------------------- numpy references


def advance_states(arrays: DFAArrays, states: np.ndarray, slots: np.ndarray,
                   tokens: np.ndarray) -> np.ndarray:
    """Advance ``states[slots]`` by ``tokens`` in place; returns the accepted flags.

    The numpy reference of kernel ``gramc_dfa_advance``. As a loop::

        for slot, t in zip(slots, tokens):
            s = states[slot]
            if s >= 0 and 0 <= t < V and next(s, t) != DEAD: states[slot] = next(s, t)
            elif s >= 0 and 0 <= t < V and accept[s] and t in eos: states[slot] = ENDED
            else: refused
    """
    s = states[slots]
    t = np.asarray(tokens, dtype=np.int64)
    valid = (s >= 0) & (t >= 0) & (t < arrays.vocab_size)
    nxt = np.zeros(len(slots), dtype=np.int32)
    nxt[valid] = arrays.next_states(s[valid], t[valid])
    moved = nxt != 0
    ended = valid & ~moved & arrays.accept[np.maximum(s, 0)].astype(bool) & np.isin(t, arrays.eos)
    states[slots[moved]] = nxt[moved]
    states[slots[ended]] = ENDED
    return moved | ended


def apply_packed(logits: Any, masks: np.ndarray, rows: np.ndarray | None = None) -> None:
    """-inf into ``logits[rows[i]]`` (or row i) where ``masks[i]`` disallows, in place.

    ``logits`` is a 2-d numpy float array or torch tensor; columns past ``32 * W`` are
    disallowed. The numpy reference of kernel ``gramc_apply_bitmask`` (see
    :func:`gramc.bitmask.apply_bitmask` for the single-row loop).
    """
    n = len(masks)
    if n == 0:
        return
    width = logits.shape[-1]
    m = min(width, 32 * masks.shape[1])
    if _is_torch(logits):
        allowed = np.unpackbits(masks.view(np.uint8), axis=1, count=m, bitorder="little").view(bool)
        _apply_torch(logits, allowed, rows, m)
        return
    if not isinstance(logits, np.ndarray) or logits.dtype.kind != "f":
        raise GramcError(f"logits must be a float numpy array or a torch tensor, got "
                         f"{getattr(logits, 'dtype', type(logits).__name__)}")
    if rows is None and logits.shape[0] == n:
        sub = logits
    else:
        sub = logits[np.arange(n) if rows is None else rows]
    if np.count_nonzero(masks) * 32 * 8 < sub.size:
        _apply_sparse(sub, masks)  # typical grammar masks: few allowed tokens
    else:
        allowed = np.unpackbits(masks.view(np.uint8), axis=1, count=m, bitorder="little")
        np.putmask(sub[:, :m], allowed == 0, -np.inf)
        sub[:, m:] = -np.inf
    if sub is not logits:
        logits[np.arange(n) if rows is None else rows] = sub


def _apply_sparse(sub: np.ndarray, masks: np.ndarray) -> None:
    """Save the allowed logits, fill every row with -inf, put them back (few allowed bits)."""
    r, w = np.nonzero(masks)
    bits = np.unpackbits(masks[r, w].view(np.uint8).reshape(-1, 4), axis=1, bitorder="little")
    k, bit = np.nonzero(bits)
    rows, cols = r[k], w[k].astype(np.int64) * 32 + bit
    inside = cols < sub.shape[1]
    rows, cols = rows[inside], cols[inside]
    kept = sub[rows, cols]
    sub.fill(-np.inf)
    sub[rows, cols] = kept


def _apply_torch(logits: Any, allowed: np.ndarray, rows: np.ndarray | None, m: int) -> None:
    import torch

    keep = torch.from_numpy(allowed).to(logits.device)
    n = keep.shape[0]
    index = torch.arange(n) if rows is None else torch.from_numpy(rows.astype(np.int64))
    if rows is None and logits.shape[0] == n:
        sub = logits
    else:
        sub = logits[index.to(logits.device)]
    sub[:, :m].masked_fill_(~keep, float("-inf"))
    sub[:, m:] = float("-inf")
    if sub is not logits:
        logits[index.to(logits.device)] = sub


def _is_torch(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "torch"


def _host_tokens(tokens: Any, n: int) -> np.ndarray:
    if _is_torch(tokens):
        tokens = tokens.detach().cpu().numpy()
    elif hasattr(tokens, "get") and not isinstance(tokens, (dict, np.ndarray)):
        tokens = tokens.get()  # CuPy / PyCUDA arrays
    toks = np.asarray(tokens)
    if toks.size and toks.dtype.kind not in "iu":
        raise GramcError(f"tokens must be integers, got {toks.dtype}")
    toks = toks.reshape(-1).astype(np.int64, copy=False)
    if len(toks) != n:
        raise GramcError(f"got {len(toks)} tokens for {n} rows")
    return toks


def _check_mask_array(out: Any, n_words_: int) -> None:
    if not isinstance(out, np.ndarray) or out.ndim != 2 or out.dtype.itemsize != 4 \
            or out.dtype.kind not in "iu" or out.shape[1] < n_words_:
        raise GramcError(f"out must be a 2-d int32/uint32 numpy array at least {n_words_} words "
                         f"wide, got {getattr(out, 'dtype', type(out).__name__)}"
                         f"{list(getattr(out, 'shape', []))}")


__all__ = ["BatchMatcher", "advance_states", "apply_packed", "ENDED"]
