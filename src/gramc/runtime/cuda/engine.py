"""The device path of :class:`~gramc.runtime.batch.BatchMatcher`.

The DFA state of every slot lives on the device (``states``, -1 once EOS was committed), with
the index of its artifact's table (``table_of``). A step is then, for the DFA rows: one kernel
that gathers each row's mask into the logits (or into a bitmask buffer) and one kernel that
advances the states by the sampled tokens, read where the sampler left them. Nothing crosses
to the host except the accepted flags, and only when the caller waits for them.

PDA rows still compute their masks on the CPU: they are packed into a page-locked buffer,
uploaded with one copy per step and applied by the bitmask kernel. Slot changes (add, reset)
are queued on the host and written by one scatter kernel before the next launch.

The engine never reads the batch's state: each call gets the row maps of that call
(:class:`RowMaps`), and what stays on the host (PDA masks and commits, row layout, token
conversion) comes through the callbacks of :class:`HostSide`, handed in with each call
(not kept, so the engine holds no reference back to the batch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np

from gramc.errors import GramcError
from gramc.runtime.cuda.device import Backend, DeviceView
from gramc.runtime.cuda.tables import DEVICE_DENSE_BUDGET, DFAArrays, DeviceTables


def resolve_backend(device: Any) -> Backend:
    """``"cuda"`` (PyCUDA) or a backend object."""
    if isinstance(device, Backend):
        return device
    if device == "cuda":
        from gramc.runtime.cuda.kernels import backend

        return backend()
    raise GramcError(f"device must be 'cpu', 'cuda' or a gramc.runtime.cuda backend, got {device!r}")


class RowMaps(Protocol):
    """How the rows of one call map to slots (int32 arrays), split by kind.

    ``slots``: the slot of each row; ``dfa_pos`` / ``pda_pos``: the positions of the DFA and
    PDA rows; ``dfa_slots`` / ``pda_slots``: their slots. ``device`` is where the engine keeps
    the maps' device copies, for as long as the caller reuses these maps.
    """

    slots: np.ndarray
    dfa_pos: np.ndarray
    dfa_slots: np.ndarray
    pda_pos: np.ndarray
    pda_slots: np.ndarray
    device: dict[str, Any]


@dataclass(frozen=True)
class HostSide:
    """The batch's work that stays on the host, as callbacks.

    Attributes:
        by_slot: ``by_slot(n_rows, rows, what)``: whether an array of ``n_rows`` rows is
            indexed by slot rather than by row (raises for any other row count).
        fill_pda: ``fill_pda(rows, out)``: the packed masks of the PDA rows, in order, into
            ``out[:len(rows.pda_pos)]`` (uint32).
        commit_pda: ``commit_pda(rows, tokens)``: commit the PDA rows' tokens (``tokens``:
            int64, one per row of the call); returns their accepted flags, in order.
        host_tokens: ``host_tokens(tokens, n)``: the caller's tokens as int64 on the host.
        budget_rows: ``budget_rows(rows)``: the rows of this call cut to a token budget, as
            (positions int32, packed masks uint32 ``[k, W]``), computed on the host; None
            when the call has no budget.
    """

    by_slot: Callable[[int, RowMaps, str], bool]
    fill_pda: Callable[[RowMaps, np.ndarray], None]
    commit_pda: Callable[[RowMaps, np.ndarray], np.ndarray]
    host_tokens: Callable[[Any, int], np.ndarray]
    budget_rows: Callable[[RowMaps], tuple[np.ndarray, np.ndarray]] | None = None


class DeviceEngine:
    """Device buffers of one batch and the per-step launches."""

    def __init__(self, device: Any, capacity: int, dense_budget: int | None = None):
        self.backend = b = resolve_backend(device)
        self.capacity = capacity
        self.tables = DeviceTables(b, DEVICE_DENSE_BUDGET if dense_budget is None else dense_budget)
        self._states = b.alloc(capacity, np.int32)
        self._table_of = b.alloc(capacity, np.int32)
        self._accepted = b.alloc(capacity, np.uint8)
        self._tokens = b.alloc(capacity, np.int64)
        self._pending: dict[int, tuple[int, int]] = {}
        self._width = 0
        self._host_masks: np.ndarray | None = None  # pinned [capacity, W]: PDA masks
        self._dev_masks: Any = None
        self._last_n = 0  # rows of the last commit (none yet)
        self._pda_ok: tuple[np.ndarray, np.ndarray] | None = None  # its PDA rows' (positions, flags)
        self._keep_budget: tuple[Any, Any] | None = None  # the last budgeted rows' device buffers

    # ------------------------------------------------------------ setup

    def set_width(self, n_words: int) -> None:
        self._width = n_words
        self._host_masks = self.backend.pinned((self.capacity, n_words), np.uint32)
        self._dev_masks = self.backend.alloc((self.capacity, n_words), np.uint32)

    def add_table(self, arrays: DFAArrays) -> int:
        return self.tables.add(arrays)

    def set_slot(self, slot: int, state: int, table: int) -> None:
        """Queue a slot's new state and table (written before the next launch)."""
        self._pending[slot] = (state, table)

    def _flush(self) -> None:
        if not self._pending:
            return
        b = self.backend
        slots = np.fromiter(self._pending, dtype=np.int32, count=len(self._pending))
        values = np.array(list(self._pending.values()), dtype=np.int32).reshape(-1, 2)
        packed = b.upload(np.concatenate([slots, values[:, 0], values[:, 1]]))
        n, base = len(slots), b.ptr(packed)
        b.scatter_i32(n, base, base + 4 * n, b.ptr(self._states))
        b.scatter_i32(n, base, base + 8 * n, b.ptr(self._table_of))
        self._pending.clear()
        self._keep = packed  # alive until the kernels that read it have run

    def states(self) -> np.ndarray:
        """Every slot's DFA state, downloaded."""
        self._flush()
        return self.backend.download(self._states)

    # ------------------------------------------------------------ row maps

    def _maps(self, plan: RowMaps, by_slot: bool) -> dict[str, Any]:
        """Device addresses of the plan's row maps (uploaded once per batch version).

        ``dfa_slots``: slot of each DFA row; ``dfa_target``: the output row of each DFA row
        (its position, or its slot for capacity-shaped arrays; null when it is the identity);
        ``dfa_rows``: the position of each DFA row (tokens, flags; null for the identity);
        ``pda_target``: the output row of each PDA row (their masks are uploaded in order).
        """
        key = "slot" if by_slot else "row"
        cached = plan.device.get(key)
        if cached is None:
            b, nd = self.backend, len(plan.dfa_slots)
            identity = len(plan.pda_pos) == 0  # then the DFA rows are rows 0..n-1 in order
            dfa_target = plan.dfa_slots if by_slot else plan.dfa_pos
            pda_target = plan.pda_slots if by_slot else plan.pda_pos
            buf = b.upload(np.concatenate([plan.dfa_slots, dfa_target, plan.dfa_pos, pda_target,
                                           np.zeros(1, np.int32)]).astype(np.int32))
            base = b.ptr(buf)
            cached = plan.device[key] = {
                "buf": buf,
                "dfa_slots": base,
                "dfa_target": 0 if identity and not by_slot else base + 4 * nd,
                "dfa_rows": 0 if identity else base + 8 * nd,
                "pda_target": base + 12 * nd,
            }
        return cached

    def _tables(self) -> tuple[int, int, int]:
        b = self.backend
        return b.ptr(self._states), b.ptr(self._table_of), self.tables.ptr

    def _matrix(self, obj: Any, what: str) -> DeviceView:
        if not self.backend.is_device_array(obj):
            raise GramcError(f"{what} must be a device array for device={self.backend.name!r} "
                             f"(got {type(obj).__name__}); use device='cpu' for host arrays")
        return self.backend.view(obj).as_matrix(what)

    def _upload_pda_masks(self, plan: RowMaps, host: HostSide) -> int:
        """CPU masks of the PDA rows, packed and uploaded with one copy; their device address."""
        assert self._host_masks is not None  # set_width runs when the first artifact is added
        masks = self._host_masks[: len(plan.pda_pos)]
        host.fill_pda(plan, masks)
        self.backend.copy_to_device(self._dev_masks, masks)
        return self.backend.ptr(self._dev_masks)

    # ------------------------------------------------------------ steps

    def fill_masks(self, plan: RowMaps, out: Any, host: HostSide) -> Any:
        b, W = self.backend, self._width
        if out is None:
            out = b.alloc((len(plan.slots), W), np.uint32)
        view = self._matrix(out, "out")
        if view.dtype not in ("u32", "i32") or view.width < W:
            raise GramcError(f"out must be int32/uint32 and at least {W} words wide")
        by_slot = host.by_slot(view.rows, plan, "out")
        maps = self._maps(plan, by_slot)
        self._flush()
        b.dfa_fill_bitmask(view, len(plan.dfa_pos), maps["dfa_target"], maps["dfa_slots"],
                           *self._tables())
        if len(plan.pda_pos):
            src = self._upload_pda_masks(plan, host)
            b.scatter_bitmask_rows(view, len(plan.pda_pos), maps["pda_target"], src, W, W)
        budgeted = self._upload_budget_rows(plan, by_slot, host)
        if budgeted is not None:  # the budgeted rows replace what the kernels wrote
            b.scatter_bitmask_rows(view, budgeted[0], budgeted[1], budgeted[2], W, W)
        return out

    def _upload_budget_rows(self, plan: RowMaps, by_slot: bool, host: HostSide) -> tuple[int, int, int] | None:
        """The budgeted rows' host masks uploaded: (rows, address of their target rows,
        address of the masks), or None without budgets. The buffers stay alive until the
        next call that has budgets (the kernels reading them have run by then)."""
        if host.budget_rows is None:
            return None
        pos, masks = host.budget_rows(plan)
        if not len(pos):
            return None
        b = self.backend
        targets = (plan.slots[pos] if by_slot else pos).astype(np.int32)
        self._keep_budget = (b.upload(np.ascontiguousarray(masks, dtype=np.uint32)), b.upload(targets))
        return len(pos), b.ptr(self._keep_budget[1]), b.ptr(self._keep_budget[0])

    def apply_masks(self, plan: RowMaps, logits: Any, host: HostSide) -> None:
        b, W = self.backend, self._width
        view = self._matrix(logits, "logits")
        by_slot = host.by_slot(view.rows, plan, "logits")
        maps = self._maps(plan, by_slot)
        self._flush()
        b.dfa_apply(view, len(plan.dfa_pos), maps["dfa_target"], maps["dfa_slots"], *self._tables())
        if len(plan.pda_pos):
            src = self._upload_pda_masks(plan, host)
            b.apply_bitmask(view, len(plan.pda_pos), src, W, W, logit_rows=maps["pda_target"])
        budgeted = self._upload_budget_rows(plan, by_slot, host)
        if budgeted is not None:  # a budgeted row allows a subset of its plain row: applied after it
            b.apply_bitmask(view, budgeted[0], budgeted[2], W, W, logit_rows=budgeted[1])

    def commit(self, plan: RowMaps, tokens: Any, wait: bool, host: HostSide) -> np.ndarray | None:
        b, n = self.backend, len(plan.slots)
        toks = None
        if b.is_device_array(tokens):
            view = b.view(tokens)
            if view.shape[0] != n or (len(view.shape) == 2 and view.shape[1] != 1) or len(view.shape) > 2:
                raise GramcError(f"tokens must be [{n}] or [{n}, 1], got shape {list(view.shape)}")
        else:
            toks = host.host_tokens(tokens, n)
            if n:
                b.copy_to_device(self._tokens, toks)
            view = b.view(self._tokens)
        maps = self._maps(plan, by_slot=False)
        self._flush()
        states, table_of, tables = self._tables()
        b.dfa_advance(view, len(plan.dfa_pos), maps["dfa_rows"], maps["dfa_slots"], states,
                      table_of, tables, b.ptr(self._accepted))
        self._last_n = n
        if len(plan.pda_pos):
            toks = host.host_tokens(tokens, n) if toks is None else toks
            self._pda_ok = (plan.pda_pos, host.commit_pda(plan, toks))
        else:
            self._pda_ok = None
        return self.last_accepted() if wait else None

    def last_accepted(self) -> np.ndarray:
        flags = self.backend.download(self._accepted)[: self._last_n].astype(bool)
        if self._pda_ok is not None:
            pos, ok = self._pda_ok
            flags[pos] = ok
        return flags
