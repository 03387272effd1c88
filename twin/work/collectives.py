"""Collective communication costs: the alpha-beta costs of the textbook algorithms (Thakur,
Rabenseifner & Gropp 2005): ring all-reduce 2 (p-1)/p S/B + 2 (p-1) alpha; all-to-all, all-gather
and reduce-scatter (p-1)/p S/B + (p-1) alpha. Scalar and array forms; pure functions.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def ring_allreduce_s(size_b: float, p: int, bw_b_s: float, alpha_s: float) -> float:
    """Ring all-reduce of ``size_b`` bytes per participant over ``p`` participants, each with
    ``bw_b_s`` bytes/s and ``alpha_s`` per hop [s]: 2 (p-1)/p S/B + 2 (p-1) alpha."""
    if p <= 1 or size_b <= 0:
        return 0.0
    return 2.0 * (p - 1) / p * size_b / bw_b_s + 2.0 * (p - 1) * alpha_s


def all_to_all_s(size_b: float, p: int, bw_b_s: float, alpha_s: float) -> float:
    """All-to-all of ``size_b`` bytes per participant (1/p of it to each peer) [s]:
    (p-1)/p S/B + (p-1) alpha. All-gather and reduce-scatter of ``size_b`` bytes in all cost
    the same."""
    if p <= 1 or size_b <= 0:
        return 0.0
    return (p - 1) / p * size_b / bw_b_s + (p - 1) * alpha_s


def ring_allreduce_arr(
    size: npt.NDArray[np.float64], n: npt.NDArray[np.float64], bw: float, alpha: float
) -> npt.NDArray[np.float64]:
    """``ring_allreduce_s`` over arrays (n <= 1: free)."""
    nn = np.maximum(n, 1.0)
    out = 2.0 * (nn - 1.0) / nn * size / bw + 2.0 * (nn - 1.0) * alpha
    return np.where(n > 1.0, out, 0.0)


def all_to_all_arr(
    size: npt.NDArray[np.float64],
    n: npt.NDArray[np.float64],
    bw: npt.NDArray[np.float64],
    alpha: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """``all_to_all_s`` over arrays (n <= 1: free)."""
    nn = np.maximum(n, 1.0)
    out = (nn - 1.0) / nn * size / bw + (nn - 1.0) * alpha
    return np.where(n > 1.0, out, 0.0)
