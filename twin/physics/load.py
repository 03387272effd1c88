"""What the physics reads of the chips' load in a step: a protocol, so the physics never imports
the work side. ``twin.work.chips.Load`` (taken from the chip pool, ``ChipPool.load``) and its
``Segments`` satisfy it."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]


class Segments(Protocol):
    """The powered chips in runs of one UltraServer held by one job (or idle) that share their
    utilisation, one column per segment."""

    @property
    def us(self) -> I64:
        """UltraServer of each segment."""
        ...

    @property
    def first(self) -> I64:
        """Lowest chip of each segment."""
        ...

    @property
    def n(self) -> F64:
        """Powered chips in each segment."""
        ...

    @property
    def g(self) -> F64:
        """Sum of the power factors g of each segment's chips."""
        ...

    @property
    def hg(self) -> F64:
        """Largest h g of each segment's chips."""
        ...


class Load(Protocol):
    """The chips' utilisation in one step (0 on unpowered chips): per segment (``seg``,
    ``seg_act``; None for a load given chip by chip), per chip (``util``, ``alive``, ``dead``)."""

    @property
    def seg(self) -> Segments | None: ...

    @property
    def seg_act(self) -> F64 | None: ...

    @property
    def util(self) -> F64: ...

    @property
    def alive(self) -> B: ...

    @property
    def dead(self) -> npt.NDArray[np.intp]: ...

    def util_at(
        self, chips: I64, owner: I32 | None = None, failed: B | None = None, replicas: bool = False
    ) -> F64:
        """``util`` of ``chips`` (``owner``, ``failed``: the pool's, where the caller keeps them;
        ``replicas``: ``chips`` are every chip the replicas hold)."""
        ...

    def changed(self) -> I64 | None:
        """The chips that changed owner or availability since the load was taken, or None for a
        load given chip by chip."""
        ...
