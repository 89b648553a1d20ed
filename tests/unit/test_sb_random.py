"""sysbench 1.0.20's random streams as workload/sb_random.py and the load core compute them."""

from __future__ import annotations

import ctypes
import ctypes.util

import pytest

from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker.driver.native import core
from services.workload import distributions, sb_random
from services.workload.program import Interpreter, digits
from services.workload.statements import Generator


@pytest.mark.parametrize("seed", [1, 42, 20101, 2**31 - 1])
def test_libc_random_is_glibcs(seed):
    """The emulated random() gives what this machine's glibc gives after srandom(seed)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.srandom(seed)
    want = [libc.random() for _ in range(500)]
    ours = sb_random.LibcRandom(seed)
    assert [ours.next() for _ in range(500)] == want


def test_a_thread_stream_starts_where_sysbenchs_does():
    """The first outputs sysbench 1.0.20 printed for sysbench.rand.uniform_uint64() at
    --rand-seed=42 --threads=1 (no report thread)."""
    s = sb_random.connection_stream(42, 0)
    assert [s.next64() for _ in range(3)] == [6678695823595818893, 12985727069636131040, 13785426779914018964]


def test_a_string_and_a_special_key_are_sysbenchs():
    """After those three outputs sysbench drew the string '62986233976-' and then special(1, 10000) = 4996
    (its '@' letters drawn between them are skipped here the same way: three draws)."""
    s = sb_random.connection_stream(42, 0)
    for _ in range(3):
        s.next64()
    assert digits(s, 1) == "62986233976"
    for _ in range(3):
        s.random()
    assert distributions.special(s.random, 1, 10000) == 4996


def test_streams_of_several_connections_are_the_threads_in_id_order():
    """Connection i takes the i-th thread's four libc numbers; one call gives the same as many."""
    many = sb_random.connection_streams(7, [0, 3, 1])
    assert [s.getstate() for s in many] == [sb_random.connection_stream(7, i).getstate() for i in (0, 3, 1)]
    assert len({s.getstate() for s in many}) == 3


def test_a_stream_refuses_draws_sysbench_has_not():
    s = sb_random.connection_stream(1, 0)
    with pytest.raises(TypeError):
        s.getrandbits(8)
    with pytest.raises(ValueError, match="xoroshiro128"):
        s.setstate((3, (), None))


@pytest.mark.parametrize("name", ["oltp_read_write", "oltp_insert", "oltp_point_select", "oltp_update_non_index"])
def test_builder_interpreter_and_core_follow_one_sysbench_stream(name):
    """From a sysbench stream the Python builder, the reference interpreter and the compiled core
    draw the same transactions, the histogram draw after each event included."""
    shape = DataShape(tables=3, table_size=1000)
    g = Generator(WorkloadSpec(name=name), shape)
    program = g.program()
    assert program.tail_draws == 1
    a, b = sb_random.connection_stream(5, 0), sb_random.connection_stream(5, 0)
    built = [g(a) for _ in range(15)]
    interpret = Interpreter(program)
    assert [interpret(b) for _ in range(15)] == built
    drawn = core.draw(program, sb_random.connection_stream(5, 0), 15)
    assert [[tuple(op) for op in trx] for trx in drawn] == [[tuple(op) for op in trx] for trx in built]
    assert a.getstate() == b.getstate()
