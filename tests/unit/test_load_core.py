"""The compiled load core (native/csrc): it is built and imports, and without a server it draws
the transactions program.py's Interpreter draws and buckets latencies as histogram.py does."""

from __future__ import annotations

import random

import pytest

from services.common.results.histogram import bucket_of
from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker.driver.native import core
from services.workload.program import Block, Const, Cycle, Digits, Distribution, Interpreter, Key, Program, Ref, \
    Statement, Unique
from services.workload.registry import WORKLOADS
from services.worker.target.connect_params import ConnectParams
from services.workload.statements import Generator


def test_the_compiled_core_is_built_and_imports():
    """`pip install` built the extension: the driver must never fall back to a Python loop."""
    from services.worker.driver.native import _core

    assert core.module() is _core
    assert _core.client_version  # linked against MariaDB Connector/C


@pytest.mark.parametrize("name", sorted(WORKLOADS))
@pytest.mark.parametrize("rand_type", ["special", "uniform", "gaussian", "pareto", "zipfian"])
def test_the_core_draws_every_workloads_transactions_as_python_does(name, rand_type):
    """Twenty events of each workload and distribution, thread 1 of 3: same statements, same keys,
    same c and pad strings as the Python interpreter of the same program on the same seed."""
    shape = DataShape(tables=1 if WORKLOADS[name].max_tables == 1 else 3, table_size=10_000)
    options = {"rand_type": rand_type}
    if "auto_inc" in WORKLOADS[name].options:
        options["auto_inc"] = False  # the unique-id generators too
    g = Generator(WorkloadSpec(name=name, options=options), shape, thread_id=1, threads=3,
                  seed_rng=random.Random(4))
    program = g.program()
    interpret, rng = Interpreter(program), random.Random(7)
    want = [interpret(rng) for _ in range(20)]
    assert core.draw(program, random.Random(7), 20) == want


@pytest.mark.parametrize("name", ["oltp_read_write", "oltp_insert", "select_random_ranges", "oltp_complex_rw"])
@pytest.mark.parametrize("options", [
    {"rand_spec_iter": 3, "rand_spec_pct": 10, "rand_spec_res": 100},
    {"rand_spec_res": 0, "rand_spec_pct": 50},
    {"rand_type": "gaussian", "rand_spec_iter": 2},
    {"rand_type": "pareto", "rand_pareto_h": 0.45},
    {"rand_type": "zipfian", "rand_zipfian_exp": 1.5},
    {"db_ps_mode": "disable"},
], ids=str)
def test_the_core_draws_sysbenchs_distribution_parameters_and_text_mode_as_python_does(name, options):
    """--rand-spec-*, --rand-pareto-h, --rand-zipfian-exp and --db-ps-mode=disable reach the core:
    its transactions are the Python interpreter's for the same program and seed."""
    if name not in WORKLOADS:
        pytest.skip(f"{name} is not registered")
    shape = DataShape(tables=1 if WORKLOADS[name].max_tables == 1 else 3, table_size=10_000)
    program = Generator(WorkloadSpec(name=name, options=options), shape, thread_id=0, threads=2,
                        seed_rng=random.Random(4)).program()
    interpret, rng = Interpreter(program), random.Random(8)
    want = [interpret(rng) for _ in range(30)]
    assert core.draw(program, random.Random(8), 30) == want


def test_the_cores_open_loop_backlog_stops_at_its_bound_and_ends_the_run_naming_it():
    """Arrivals at 1,000,000/s and nobody taking them: the core's queue stops growing past the
    bound and the load process's fatal error names the backlog."""
    lib = core.module()
    program = Program((Block((Statement("other", ("DO 0",), text=True),)),), Distribution("uniform"))
    k = lib.Core([core.encode(program)], [random.Random(0).getstate()], [-1],
                 core.connect_tuple(ConnectParams()), False, None, False, 1_000_000.0,
                 random.Random(1).getstate(), 1_000)
    assert k.queue(0.0005) < 1_000 and k.backlog() is None
    assert k.queue(5.0) <= 1_001 and k.backlog() == 1_001
    k.close()


def test_the_core_runs_a_literal_program_with_every_generator():
    """Registers, constants, NULL, both unique-id generators and plain text."""
    prog = Program(
        (
            Block((Statement("read", ("A1 ? ?", "A2 ? ?"), (Key(1, 10, 0), Ref(0, 5))),), repeat=3, tables=2),
            Block((Statement("write", ("W ? ? ? ?",), (Const(None), Const(-4), Unique(7, 11, 2, -9), Cycle(3, 2, 17))),)),
            Block((Statement("write", ("T ? '?'",), (Cycle(1, 1, 5), Digits(2)), text=True),)),
        ),
        Distribution("special"),
        registers=1,
    )
    want = Interpreter(prog)
    rng = random.Random(2)
    expected = [want(rng) for _ in range(4)]
    assert core.draw(prog, random.Random(2), 4) == expected


@pytest.mark.parametrize("bad, message", [
    (((), (0, 12, 1, 75, 0.2, 0.8), True, 0, ()), "no statements"),
    ((((0, 1, ((0, False, ("S ?",), ((1, 3, 0, 0, 0),)),)),), (0, 12, 1, 75, 0.2, 0.8), True, 0, ("S ?",)),
     "register out of range"),
    ((((0, 1, ((0, False, ("S",), ()),)),), (0, 12, 1, 75, 0.2, 0.8), True, 0, ()), "missing from the prepared"),
    ((((0, 1, ((0, False, ("S",), ()),)),), (9, 12, 1, 75, 0.2, 0.8), True, 0, ("S",)), "distribution"),
])
def test_the_core_refuses_a_malformed_program_by_name(bad, message):
    with pytest.raises(ValueError, match=message):
        core.module().draw(bad, random.Random(1).getstate(), 1)


def test_the_core_buckets_latencies_as_the_histogram_does():
    """Every bucket edge region from 0.1 us to 100 s falls in histogram.py's bucket."""
    values = [0.1, 0.999, 1.0, 1.0099, 1.01, 1.0101, 57.3, 999.99, 1e6, 1e8]
    rng = random.Random(1)
    values += [10 ** rng.uniform(-1, 8) for _ in range(20_000)]
    lib = core.module()
    assert [lib.bucket_of(v) for v in values] == [bucket_of(v) for v in values]


def test_the_cores_open_loop_arrivals_are_the_python_schedules():
    """Same rate, start and seed: the core hands out arrivals.py's intended start times, and none
    at or after the deadline."""
    from services.worker.driver.native.arrivals import Schedule

    s = Schedule(250.0, 5.0, random.Random("9:arrivals:0"))
    want = [s.take(1e9) for _ in range(1000)]
    lib = core.module()
    assert lib.arrivals(250.0, 5.0, random.Random("9:arrivals:0").getstate(), 1000, 1e9) == want
    assert lib.arrivals(250.0, 5.0, random.Random("9:arrivals:0").getstate(), 1000, want[9]) == want[:9]
