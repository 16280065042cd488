"""The statistics of comparisons and repeats, as plain functions of counts.

* :func:`wilson_interval` — a pass rate's 95% interval (Wilson score: sensible at 0/n and n/n
  and for small n, where the normal approximation is not);
* :func:`mcnemar_exact` — McNemar's exact two-sided test on the discordant pairs of a paired
  comparison: under "no difference" each discordant pair goes either way with probability ½,
  so the p-value is the two-sided binomial tail ``min(1, 2·P(X ≤ min(b, c)))``, ``X ~ B(b+c, ½)``
  — what scipy's ``binomtest`` gives for p = ½, computed here in exact integers (importing
  scipy.stats costs a CI job 1-2 s; the sum is milliseconds even for 10,000 pairs);
* :func:`paired_bootstrap` — the paired difference of two pass rates with a percentile
  bootstrap interval over the pairs, from a fixed seed (the same tables give the same interval;
  a resample is drawn as multinomial counts of the pairs' differences -1 / 0 / +1, which is
  resampling the pairs, at a cost independent of how many there are);
* :func:`cohen_kappa` — Cohen's kappa of two raters' labels on the same items (any categories:
  pass/fail or scores), and :func:`kappa_bootstrap` its percentile bootstrap interval over
  the items, from a fixed seed (resamples where kappa is undefined — every label the same
  category — are left out);
* :func:`pass_at_k` / :func:`pass_hat_k` — of n repeats with c passes, the chance that at
  least one / every one of k repeats passes (the unbiased estimators of Chen et al. 2021 and
  tau-bench; with k = n they are "any passed" and "all passed").
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy.typing as npt

    NDArray = npt.NDArray[Any]

__all__ = [
    "DEFAULT_SEED",
    "Z95",
    "bootstrap_picks",
    "cohen_kappa",
    "kappa_bootstrap",
    "mcnemar_exact",
    "paired_bootstrap",
    "pass_at_k",
    "pass_hat_k",
    "wilson_interval",
]

#: the normal quantile of a two-sided 95% interval
Z95 = 1.959963984540054
#: the bootstrap's seed unless one is given (printed with every interval it makes)
DEFAULT_SEED = 20240611


def wilson_interval(passed: int, runs: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of *passed* of *runs* (NaN, NaN for no runs)."""
    if runs <= 0:
        return math.nan, math.nan
    rate = passed / runs
    scale = 1 + z * z / runs
    centre = (rate + z * z / (2 * runs)) / scale
    half = z / scale * math.sqrt(rate * (1 - rate) / runs + z * z / (4 * runs * runs))
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """McNemar's exact two-sided p-value: *only_a* pairs passed on A only, *only_b* on B only
    (1.0 when there are no discordant pairs)."""
    discordant = only_a + only_b
    if discordant == 0:
        return 1.0
    smaller = min(only_a, only_b)
    term = total = 1  # C(n, 0), then C(n, i) for i = 1 … smaller, exactly
    for i in range(smaller):
        term = term * (discordant - i) // (i + 1)
        total += term
    return min(1.0, 2 * total / (1 << discordant))


def paired_bootstrap(
    a: Sequence[bool],
    b: Sequence[bool],
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = 10_000,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """``(difference, low, high)``: B's pass rate minus A's over the pairs ``(a[i], b[i])``,
    and the percentile bootstrap interval of resampling the pairs (NaN for no pairs)."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} and {len(b)}")
    if not a:
        return math.nan, math.nan, math.nan
    import numpy as np

    differences = np.asarray(b, dtype=int) - np.asarray(a, dtype=int)
    n = len(differences)
    # a resample of the pairs is a draw of how many of its n pairs are -1, 0 and +1: a
    # multinomial draw over their shares, the same distribution as resampling the pairs one
    # by one, in O(resamples) memory (10,000 resamples of 10,000 pairs are 3 numbers each)
    shares = [float(np.mean(differences == value)) for value in (-1, 0, 1)]
    counts = np.random.default_rng(seed).multinomial(n, shares, size=resamples)
    means = (counts[:, 2] - counts[:, 0]) / n
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(differences.mean()), float(low), float(high)


def bootstrap_picks(n: int, *, seed: int = DEFAULT_SEED, resamples: int = 10_000) -> NDArray:
    """The items each bootstrap resample draws: a ``(resamples, n)`` array of indices in
    ``0 … n-1`` from numpy's default generator seeded with *seed* (the kappa bootstrap draws its
    resamples this way: the same seed gives the same resamples)."""
    import numpy as np

    generator = np.random.default_rng(seed)
    return generator.integers(0, n, size=(resamples, n))


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Cohen's kappa of the paired labels ``(a[i], b[i])``: ``(p_o - p_e) / (1 - p_e)`` with
    p_o the share of items they agree on and p_e the agreement expected by chance from each
    rater's own label frequencies (NaN when p_e is 1: both always gave one same label; NaN
    for no items)."""
    if len(a) != len(b):
        raise ValueError(f"paired labels differ in length: {len(a)} and {len(b)}")
    value = _kappas(*_codes(a, b), None)
    return float(value[0])


def kappa_bootstrap(
    a: Sequence[Hashable],
    b: Sequence[Hashable],
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = 2_000,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """``(kappa, low, high)``: :func:`cohen_kappa` and its percentile bootstrap interval over
    the items (:func:`bootstrap_picks`; a resample whose kappa is undefined is left out;
    NaN when none is defined)."""
    if len(a) != len(b):
        raise ValueError(f"paired labels differ in length: {len(a)} and {len(b)}")
    if not a:
        return math.nan, math.nan, math.nan
    import numpy as np

    codes_a, codes_b, categories = _codes(a, b)
    kappa = float(_kappas(codes_a, codes_b, categories, None)[0])
    picks = bootstrap_picks(len(a), seed=seed, resamples=resamples)
    values = _kappas(codes_a, codes_b, categories, picks)
    values = values[~np.isnan(values)]
    if not len(values):
        return kappa, math.nan, math.nan
    tail = (1 - confidence) / 2
    low, high = np.quantile(values, [tail, 1 - tail])
    return kappa, float(low), float(high)


def _codes(a: Sequence[Hashable], b: Sequence[Hashable]) -> tuple[NDArray, NDArray, int]:
    """Both raters' labels as category numbers, and how many categories there are."""
    import numpy as np

    index: dict[Hashable, int] = {}
    for label in (*a, *b):
        index.setdefault(label, len(index))
    return (
        np.asarray([index[label] for label in a], dtype=np.int64),
        np.asarray([index[label] for label in b], dtype=np.int64),
        len(index),
    )


def _kappas(codes_a: NDArray, codes_b: NDArray, categories: int, picks: NDArray | None) -> NDArray:
    """Kappa of each resample (a row of *picks*), or of the items as they are (one value)."""
    import numpy as np

    if picks is None:
        picks = np.arange(len(codes_a))[np.newaxis, :]
    if picks.shape[1] == 0:
        return np.asarray([math.nan])
    left, right = codes_a[picks], codes_b[picks]
    observed = (left == right).mean(axis=1)
    expected = np.zeros(len(picks))
    for category in range(categories):
        expected += (left == category).mean(axis=1) * (right == category).mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappas = (observed - expected) / (1.0 - expected)
    return np.where(np.isclose(expected, 1.0, rtol=0.0, atol=1e-12), math.nan, kappas)


def pass_at_k(runs: int, passed: int, k: int) -> float:
    """Of *k* repeats drawn from *runs* with *passed* passes, the chance that one passes."""
    if k <= 0 or runs < k:
        return math.nan
    if runs - passed < k:
        return 1.0
    return 1.0 - math.comb(runs - passed, k) / math.comb(runs, k)


def pass_hat_k(runs: int, passed: int, k: int) -> float:
    """pass^k: of *k* repeats drawn from *runs* with *passed* passes, the chance all pass."""
    if k <= 0 or runs < k:
        return math.nan
    return math.comb(passed, k) / math.comb(runs, k)
