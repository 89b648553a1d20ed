"""sysbench's random-number distributions (src/sb_rand.c), as pure functions of a [0, 1) source.

Each function takes ``r`` (e.g. ``random.Random(seed).random``) and an inclusive range
[a, b] and returns an int in it, computed the way sysbench computes it, so key-access skew
matches sysbench's for the same ``--rand-type``. The float operations follow sb_rand.c's order
(``a + u * n`` truncated as a whole, multiplying by 1 / iters), so from sysbench's stream
(sb_random.py) they give sysbench's keys to the last one. Defaults are sysbench 1.0.20's
(--rand-spec-iter=12, --rand-spec-pct=1, --rand-spec-res=75, --rand-pareto-h=0.2); zipfian
is sysbench 1.1's (--rand-zipfian-exp=0.8), since 1.0.20 has none.
"""

from __future__ import annotations

import math
from typing import Callable

Source = Callable[[], float]
Draw = Callable[[Source, int, int], int]

SPEC_ITER = 12
SPEC_PCT = 1
SPEC_RES = 75
PARETO_H = 0.2
ZIPFIAN_EXP = 0.8


def uniform(r: Source, a: int, b: int) -> int:
    """Every value of [a, b] equally likely (sb_rand_uniform)."""
    return int(a + r() * (b - a + 1))


def gaussian(r: Source, a: int, b: int, iters: int = SPEC_ITER) -> int:
    """Approximately normal around the middle: the mean of ``iters`` uniform draws."""
    t = b - a + 1
    s = 0.0
    for _ in range(iters):
        s += r() * t
    return a + int(s * (1.0 / iters))


def special(r: Source, a: int, b: int, iters: int = SPEC_ITER, pct: int = SPEC_PCT,
            res: int = SPEC_RES) -> int:
    """sysbench 1.0's default: ``res``% of draws fall uniformly in the middle ``pct``% of the
    range (the hot rows), the rest are gaussian over the whole range."""
    t = b - a
    rnd = r()
    # The first draw decides the branch and, in the hot branch, is reused as the position.
    # res = 100 sends every draw to the hot rows (sysbench's 100 / 0.0 is infinite).
    if res < 100 and rnd * (t * (100.0 / (100.0 - res))) < t:
        if iters == 12:
            # The default, written out: it is every load loop's hottest line (three times in
            # four per key), and a loop costs twice as many bytecodes. Summed left to right
            # from the first draw as the loop sums from 0.0, so the value is the same.
            s = r() + r() + r() + r() + r() + r() + r() + r() + r() + r() + r() + r()
        else:
            s = 0.0
            for _ in range(iters):
                s += r()
        return int(a + s * t * (1.0 / iters))
    d = t * (pct / 100.0)
    return a + int(rnd * (d + 1) + (t / 2 - t * (pct / 200.0)))


def _pareto_power(h: float) -> float:
    if not 0.0 < h < 1.0:
        raise ValueError(f"pareto h must be between 0 and 1 (exclusive), not {h}")
    return math.log(h) / math.log(1.0 - h)


_PARETO_POWER = _pareto_power(PARETO_H)


def pareto(r: Source, a: int, b: int, power: float = _PARETO_POWER) -> int:
    """Pareto with sysbench's h=0.2: most draws near ``a``."""
    return a + int((b - a + 1) * r() ** power)


# Zipf by rejection-inversion (Hörmann & Derflinger), as sb_rand.c ports it from Apache
# Commons RNG; the helpers keep precision when the exponent is near 1.


def _helper1(x: float) -> float:
    return math.log1p(x) / x if abs(x) > 1e-8 else 1 - x * (0.5 - x * (1 / 3 - 0.25 * x))


def _helper2(x: float) -> float:
    return math.expm1(x) / x if abs(x) > 1e-8 else 1 + x * 0.5 * (1 + x / 3 * (1 + 0.25 * x))


def _h_integral(x: float, e: float) -> float:
    log_x = math.log(x)
    return _helper2((1 - e) * log_x) * log_x


def _h(x: float, e: float) -> float:
    return math.exp(-e * math.log(x))


def _h_integral_inverse(x: float, e: float) -> float:
    t = max(x * (1 - e), -1.0)
    return math.exp(_helper1(t) * x)


def make_zipfian(e: float = ZIPFIAN_EXP) -> Draw:
    """A zipfian draw with exponent ``e`` (>= 0): value a + k - 1 has weight 1 / k**e."""
    if e < 0:
        raise ValueError("zipfian exponent must be >= 0")
    s = 2 - _h_integral_inverse(_h_integral(2.5, e) - _h(2, e), e)
    h_x1 = _h_integral(1.5, e) - 1

    def zipfian(r: Source, a: int, b: int) -> int:
        n = b - a + 1
        h_n = _h_integral(n + 0.5, e)
        while True:
            u = h_n + r() * (h_x1 - h_n)
            x = _h_integral_inverse(u, e)
            k = min(max(int(x + 0.5), 1), n)
            if k - x <= s or u >= _h_integral(k + 0.5, e) - _h(k, e):
                return a + k - 1

    return zipfian


zipfian = make_zipfian()

#: The draw behind sysbench.rand.default for each --rand-type.
BY_NAME: dict[str, Draw] = {
    "uniform": uniform,
    "gaussian": gaussian,
    "special": special,
    "pareto": pareto,
    "zipfian": zipfian,
}


def make(rand_type: str, *, iters: int = SPEC_ITER, pct: int = SPEC_PCT, res: int = SPEC_RES,
         pareto_h: float = PARETO_H, zipfian_exp: float = ZIPFIAN_EXP) -> Draw:
    """The draw for ``rand_type`` with sysbench's parameters (--rand-spec-iter, --rand-spec-pct,
    --rand-spec-res, --rand-pareto-h, --rand-zipfian-exp); the defaults give by_name's draws.
    ValueError names an unknown type or a parameter out of its range."""
    if rand_type not in BY_NAME:
        by_name(rand_type)
    if iters < 1:
        raise ValueError(f"rand_spec_iter must be >= 1, not {iters}")
    if rand_type == "gaussian" and iters != SPEC_ITER:
        return lambda r, a, b: gaussian(r, a, b, iters)
    if rand_type == "special" and (iters, pct, res) != (SPEC_ITER, SPEC_PCT, SPEC_RES):
        return lambda r, a, b: special(r, a, b, iters, pct, res)
    if rand_type == "pareto" and pareto_h != PARETO_H:
        power = _pareto_power(pareto_h)
        return lambda r, a, b: pareto(r, a, b, power)
    if rand_type == "zipfian" and zipfian_exp != ZIPFIAN_EXP:
        return make_zipfian(zipfian_exp)
    return BY_NAME[rand_type]


def by_name(rand_type: str) -> Draw:
    """The draw for a ``rand_type`` option value; ValueError names the known ones."""
    try:
        return BY_NAME[rand_type]
    except KeyError:
        raise ValueError(f"unknown rand_type {rand_type!r}; known: {', '.join(BY_NAME)}") from None
