"""sysbench 1.0.20's random streams (src/sb_rand.c): glibc's ``random()`` seeded by
``srandom(--rand-seed)`` hands each thread four numbers that seed its xoroshiro128+, whose
outputs give every key and string of a transaction. The native driver draws from the same
streams, so at one connection it sends what sysbench sends (docs/drivers.md, "Random streams").
Pure: no I/O.
"""

from __future__ import annotations

import random
from typing import Any, Iterable

_M64 = (1 << 64) - 1
_M32 = 0xFFFFFFFF
#: sb_rand_uniform_double: the top 52 bits of an output as a fraction of 1.
_FRACTION = 1.0 / (1 << 52)
#: The state tag native/core passes to the load core with the two words.
STATE_TAG = "xoroshiro128+"


class LibcRandom:
    """glibc's ``random()`` after ``srandom(seed)`` (random_r.c, TYPE_3: 31 words, separation 3)."""

    def __init__(self, seed: int):
        seed &= _M32
        word = seed or 1
        if word >= 1 << 31:
            word -= 1 << 32  # the int32_t glibc stores
        state = [word]
        for _ in range(30):
            # C's division truncates toward zero, as int() of the quotient does.
            hi = int(word / 127773)
            lo = word - hi * 127773
            word = 16807 * lo - 2836 * hi
            if word < 0:
                word += 2147483647
            state.append(word)
        self._state = [w & _M32 for w in state]
        self._f, self._r = 3, 0
        for _ in range(310):
            self.next()

    def next(self) -> int:
        """The next value of ``random()``: 31 bits."""
        s = self._state
        val = (s[self._f] + s[self._r]) & _M32
        s[self._f] = val
        self._f, self._r = (self._f + 1) % 31, (self._r + 1) % 31
        return val >> 1


def _word(libc: LibcRandom) -> int:
    # (random() << 32) | random(): the left-hand call first in the Debian binary (C leaves the
    # order unspecified; tests/integration/test_rng_parity.py checks it against /usr/bin/sysbench).
    high = libc.next()
    return (high << 32) | libc.next()


def _rotl(x: int, k: int) -> int:
    return ((x << k) | (x >> (64 - k))) & _M64


class SysbenchStream(random.Random):
    """One sysbench thread's xoroshiro128+ stream; ``random()`` is sb_rand_uniform_double, the
    [0, 1) value every sysbench draw starts from. Only random(), getstate() and setstate() are
    sysbench's; the other random.Random methods are refused rather than quietly drawing MT."""

    def __init__(self, s0: int, s1: int):
        super().__init__(0)
        self._s = [s0 & _M64, s1 & _M64]

    def seed(self, *args: Any, **kwargs: Any) -> None:
        # random.Random.__init__ seeds its own generator, which this class never uses.
        super().seed(0)

    def next64(self) -> int:
        """The next 64-bit output (sb_rand_uniform_uint64)."""
        s0, s1 = self._s
        result = (s0 + s1) & _M64
        s1 ^= s0
        self._s = [_rotl(s0, 55) ^ s1 ^ ((s1 << 14) & _M64), _rotl(s1, 36)]
        return result

    def random(self) -> float:
        return (self.next64() >> 12) * _FRACTION

    def getrandbits(self, k: int) -> int:
        raise TypeError("a sysbench stream draws only random(): sysbench has no getrandbits")

    def getstate(self) -> tuple[str, int, int]:
        return (STATE_TAG, self._s[0], self._s[1])

    def setstate(self, state: Any) -> None:
        if not (isinstance(state, tuple) and len(state) == 3 and state[0] == STATE_TAG):
            raise ValueError(f"sysbench stream state {state!r}: not ({STATE_TAG!r}, s0, s1)")
        self._s = [int(state[1]) & _M64, int(state[2]) & _M64]


def connection_streams(seed: int, indexes: Iterable[int]) -> list[SysbenchStream]:
    """The stream of each ``index``-th thread (0-based) to seed itself in a sysbench run with
    ``--rand-seed=seed``: it takes random()'s numbers 4 * index to 4 * index + 3 after srandom.
    At one thread that is sysbench's own stream; above one, sysbench's threads take their
    numbers in whatever order they start, and this is the order of their ids."""
    wanted = list(indexes)
    if any(i < 0 for i in wanted):
        raise ValueError(f"connection_streams indexes {wanted}: must be >= 0")
    libc, words = LibcRandom(seed), []
    for _ in range(max(wanted, default=-1) + 1):
        words.append((_word(libc), _word(libc)))
    return [SysbenchStream(*words[i]) for i in wanted]


def connection_stream(seed: int, index: int) -> SysbenchStream:
    """connection_streams for one thread."""
    return connection_streams(seed, (index,))[0]


def unique_seed() -> tuple[int, int]:
    """The (index, offset) sysbench seeds sysbench.rand.unique() with: sb_rand_init runs before
    srandom(--rand-seed), so they are glibc's 5th and 6th numbers of its default seed (1)
    whatever the seed; the main thread's stream took the first four."""
    libc = LibcRandom(1)
    for _ in range(4):
        libc.next()
    first = libc.next()
    # rand_unique_seed(random(), random()): again the right-hand call first.
    return libc.next(), first
