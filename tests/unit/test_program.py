"""Transaction programs: every workload compiled from the registry draws, on the same random
stream, the same statements as its Python builder; malformed programs are refused by name."""

from __future__ import annotations

import random

import pytest

from services.common.spec.workloads import DataShape, WorkloadSpec
from services.worker.driver.native import core
from services.workload.program import (
    Block,
    Const,
    Cycle,
    Digits,
    Distribution,
    Interpreter,
    Key,
    Program,
    Ref,
    Statement,
    Unique,
)
from services.workload.registry import WORKLOADS
from services.workload.statements import Generator, text_events, uses_prepared

SHAPE = DataShape(tables=4, table_size=1000)
ONE = DataShape(tables=1, table_size=1000)

#: Option sets that change which blocks a program has, per workload family.
VARIANTS = [
    {},
    {"rand_type": "uniform"},
    {"rand_type": "gaussian"},
    {"rand_type": "pareto"},
    {"rand_type": "zipfian"},
    # sysbench's distribution parameters and --db-ps-mode=disable (every statement as text).
    {"rand_spec_iter": 3, "rand_spec_pct": 10, "rand_spec_res": 100},
    {"rand_type": "gaussian", "rand_spec_iter": 5},
    {"rand_type": "pareto", "rand_pareto_h": 0.5},
    {"rand_type": "zipfian", "rand_zipfian_exp": 1.3},
    {"db_ps_mode": "disable"},
    {"db_ps_mode": "disable", "rand_spec_res": 0},
]
OLTP_VARIANTS = [
    {"skip_trx": True, "range_selects": False},
    {"point_selects": 0, "delete_inserts": 3, "index_updates": 2, "non_index_updates": 0},
    {"auto_inc": False, "range_size": 7},
]


def _cases():
    for name, w in sorted(WORKLOADS.items()):
        shape = ONE if w.max_tables == 1 else SHAPE
        extra = OLTP_VARIANTS if "point_selects" in w.options else []
        if "lock_tables" in w.options:
            extra = [{"lock_tables": True}]
        if "auto_inc" in w.options and "point_selects" not in w.options:
            extra = extra + [{"auto_inc": False}]
        for options in VARIANTS + extra:
            yield pytest.param(name, shape, options, id=f"{name}-{options}")


@pytest.mark.parametrize("name, shape, options", list(_cases()))
def test_every_workload_program_draws_what_its_builder_draws(name, shape, options):
    """Five events on thread 2 of 3 with one seed: the program and the builder give the same
    statements and parameters, unique ids included."""
    spec = WorkloadSpec(name=name, options=options)

    def gen() -> Generator:
        return Generator(spec, shape, thread_id=2, threads=3, seed_rng=random.Random(5))

    builder, program = gen(), Interpreter(gen().program())
    # What the Python client sent: the builder's statements, as text under db_ps_mode disable.
    event = builder.event if uses_prepared(spec) else text_events(builder.event)
    a, b = random.Random(11), random.Random(11)
    for _ in range(5):
        assert program(b) == event(a)


def test_a_program_prepares_each_statement_once_and_no_plain_text_one():
    """oltp_read_write prepares what its builder's connection prepares; oltp_insert prepares nothing."""
    g = Generator(WorkloadSpec(name="oltp_read_write"), SHAPE)
    assert sorted(g.program().prepared()) == sorted(g.statements())
    assert Generator(WorkloadSpec(name="oltp_insert"), SHAPE).program().prepared() == ()


def test_db_ps_mode_disable_sends_every_statement_as_text_with_strings_quoted():
    """Nothing is prepared; BEGIN and COMMIT are text too, numbers written bare, c and pad quoted."""
    spec = WorkloadSpec(name="oltp_read_write", options={"db_ps_mode": "disable"})
    program = Generator(spec, ONE).program()
    assert program.prepared() == ()
    trx = Interpreter(program)(random.Random(3))
    assert all(params is None for _, _, params in trx)
    assert trx[0][1] == "BEGIN" and trx[-1][1] == "COMMIT"
    update_c = next(sql for _, sql, _ in trx if sql.startswith("UPDATE sbtest1 SET c="))
    assert update_c.startswith("UPDATE sbtest1 SET c='") and "' WHERE id=" in update_c
    assert "?" not in "".join(sql for _, sql, _ in trx)


def test_a_literal_program_runs_blocks_registers_and_generators_in_order():
    """A two-table block drawn once, a register read back with an offset, constants, a
    sysbench 0.5 id cycle and plain text rendered with its values."""
    prog = Program(
        (
            Block((Statement("other", ("BEGIN",)),)),
            Block((Statement("read", ("A1 ? ?", "A2 ? ?"), (Key(1, 10, 0), Ref(0, 5))),), repeat=2, tables=2),
            Block((Statement("write", ("T ? ? ?",), (Const(7), Cycle(1, 2, 10), Digits(1)), text=True),)),
        ),
        Distribution("uniform"),
        registers=1,
    )
    rng = random.Random(3)
    ref = random.Random(3)
    # sysbench.rand.uniform's truncation of a + u * n, and sb_rand_str's one draw per digit.
    t = int(1 + ref.random() * 2) - 1
    k1 = int(1 + ref.random() * 10)
    k2 = int(1 + ref.random() * 10)
    d = "".join(str(int(ref.random() * 10)) for _ in range(11))
    assert Interpreter(prog)(rng) == [
        ("other", "BEGIN", ()),
        ("read", f"A{t + 1} ? ?", (k1, k1 + 5)),
        ("read", f"A{t + 1} ? ?", (k2, k2 + 5)),
        ("write", f"T 7 {2147483647 % 10 + 1} {d}", None),
    ]


def test_unique_ids_walk_the_connections_residue_class():
    """Unique draws nothing from the stream and steps by the thread count."""
    prog = Program((Block((Statement("write", ("?",), (Unique(5, 9, 3),)),)),), Distribution("uniform"))
    it = Interpreter(prog)
    rng = random.Random(1)
    state = rng.getstate()
    first, second = it(rng)[0][2][0], it(rng)[0][2][0]
    assert rng.getstate() == state and first != second


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: Distribution("lognormal"), "distribution name"),
        (lambda: Distribution("special", iters=0), "distribution iters"),
        (lambda: Statement("read", ("SELECT ?",), ()), "1 placeholders for 0 params"),
        (lambda: Statement("scan", ("SELECT 1",)), "statement kind"),
        (lambda: Block((Statement("read", ("x",)),), repeat=0), "block repeat"),
        (lambda: Block((Statement("read", ("x",)),), tables=2), "1 SQL strings for a block of 2 tables"),
        (lambda: Program((Block((Statement("read", ("?",), (Ref(1),)),)),), Distribution("uniform")), "register 1"),
        (lambda: Program((), Distribution("uniform"), counting="tpcc"), "program counting"),
    ],
)
def test_a_malformed_program_names_what_is_wrong(make, field):
    with pytest.raises(ValueError, match=field):
        make()


def test_a_block_of_no_repeats_draws_its_table_and_sends_nothing():
    """sysbench's execute_* draw a table for a count of 0: the stream moves, no statement is added;
    such a block without a table to draw is refused by name, and so is a program that sends nothing."""
    sends = Block((Statement("read", ("B",)),))
    prog = Program((Block((Statement("read", ("A1", "A2")),), repeat=0, tables=2), sends), Distribution("uniform"))
    rng, ref = random.Random(4), random.Random(4)
    assert Interpreter(prog)(rng) == [("read", "B", ())]
    ref.random()
    assert rng.getstate() == ref.getstate()
    assert core.draw(prog, random.Random(4), 2) == [[("read", "B", ())]] * 2
    with pytest.raises(ValueError, match="block repeat 0"):
        Block((Statement("read", ("A",)),), repeat=0)
    with pytest.raises(ValueError, match="no statements"):
        core.draw(Program(prog.blocks[:1], Distribution("uniform")), random.Random(4), 1)
