"""The settling rules on literal snapshots: when a target counts as settled, when the worker waits,
when it gives up and how it names what was busy, and which connections are an earlier run's."""

from __future__ import annotations

from services.common.spec.targets import Quiesce
from services.worker.target.settling import (
    Connection,
    Snapshot,
    Verdict,
    abandoned,
    client_host,
    client_port,
    decide,
    flushing_stopped,
    history_from_innodb_status,
    leftovers,
    live_client_ports,
    snapshot,
    window,
)

RULES = Quiesce(timeout=10.0, max_dirty_pct=1.0, max_history=1000)
QUIET = dict(dirty_pages=10, total_pages=8000, history_length=0, pending_reads=0, pending_writes=0, pending_fsyncs=0)

ME = Connection(id=7, user="bench", host="127.0.0.1:40000", db="sbtest", command="Query", time_s=0,
                state="starting", info="SHOW FULL PROCESSLIST")
SLEEPER = Connection(id=31, user="bench", host="127.0.0.1:40100", db="sbtest", command="Query", time_s=41,
                     state="User sleep", info="SELECT SLEEP(600)")


def snap(t: float, **fields) -> Snapshot:
    return Snapshot(elapsed_s=t, **{**QUIET, **fields})


def test_quiet_target_is_settled_at_the_first_look():
    """Few dirty pages, purge done, no pending I/O, nothing running: settled at once."""
    d = decide([snap(0.0)], RULES)
    assert d.verdict is Verdict.SETTLED and d.unsettled == () and d.unknown == ()


def test_each_busy_sign_keeps_the_worker_waiting_and_is_named():
    """Dirty pages being flushed, a long history list, pending I/O and a running statement each
    hold the run back, and the decision says which."""
    history = [snap(0.0, dirty_pages=4000), snap(0.5, dirty_pages=3000, history_length=250_000, pending_writes=2,
                                                  pending_fsyncs=1, leftovers=(SLEEPER,))]
    d = decide(history, RULES)
    assert d.verdict is Verdict.WAIT
    assert d.unsettled == (
        "InnoDB dirty pages at 37.5% of the buffer pool, still being flushed (max_dirty_pct 1)",
        "InnoDB history list length 250,000: purge has not caught up (max_history 1,000)",
        "InnoDB pending I/O: 2 writes, 1 fsync",
        "connection 31 (bench@127.0.0.1:40100 on sbtest, Query for 41 s, User sleep, SELECT SLEEP(600)) still running",
    )


def test_gives_up_at_the_timeout_naming_what_was_running():
    """At the timeout a target still running an earlier statement is given up on, naming it."""
    d = decide([snap(0.0, leftovers=(SLEEPER,)), snap(10.0, leftovers=(SLEEPER,))], RULES)
    assert d.verdict is Verdict.GIVE_UP
    assert d.unsettled == ("connection 31 (bench@127.0.0.1:40100 on sbtest, Query for 41 s, User sleep, "
                           "SELECT SLEEP(600)) still running",)


def test_settling_at_the_timeout_is_not_giving_up():
    """A target that has settled by the last look counts as settled even at the timeout."""
    assert decide([snap(0.0, history_length=5000), snap(10.0)], RULES).verdict is Verdict.SETTLED


def test_thresholds_are_inclusive():
    """Exactly max_dirty_pct and max_history are settled; one more is not."""
    assert decide([snap(0.0, dirty_pages=80, history_length=1000)], RULES).verdict is Verdict.SETTLED
    assert decide([snap(0.0, dirty_pages=81)], RULES).verdict is Verdict.WAIT
    assert decide([snap(0.0, history_length=1001)], RULES).verdict is Verdict.WAIT


def test_dirty_pages_that_stopped_falling_count_as_settled():
    """An idle server that flushes no more (MariaDB's lwm 0) leaves a steady count: after
    STEADY_S seconds without a fall the worker stops waiting for it."""
    steady = [snap(t, dirty_pages=2400) for t in (0.0, 1.0, 2.0)]
    assert decide(steady, RULES).verdict is Verdict.WAIT  # not 3 s of history yet
    steady.append(snap(3.0, dirty_pages=2410))
    assert flushing_stopped(steady)
    assert decide(steady, RULES).verdict is Verdict.SETTLED


def test_dirty_pages_still_falling_keep_the_worker_waiting():
    """A count that fell within the last STEADY_S seconds means flushing goes on."""
    falling = [snap(0.0, dirty_pages=4000), snap(1.0, dirty_pages=4000), snap(2.0, dirty_pages=3900),
               snap(3.0, dirty_pages=4000), snap(3.5, dirty_pages=4000)]
    assert not flushing_stopped(falling)
    assert decide(falling, RULES).verdict is Verdict.WAIT


def test_unreadable_values_are_not_waited_for_but_reported():
    """A server without a history list length (no PROCESS privilege on MySQL) settles on the
    rest and says what it could not read."""
    d = decide([snap(0.0, history_length=None, pending_reads=None, pending_writes=None, pending_fsyncs=None)], RULES)
    assert d.verdict is Verdict.SETTLED
    assert d.unknown == ("InnoDB history list length", "InnoDB pending I/O")


def test_connections_only_ignores_innodb_state():
    """Before prepare only statements of earlier runs count."""
    busy = snap(0.0, dirty_pages=8000, history_length=10**6)
    assert decide([busy], RULES, connections_only=True).verdict is Verdict.SETTLED
    assert decide([snap(0.0, leftovers=(SLEEPER,))], RULES, connections_only=True).verdict is Verdict.WAIT


def test_snapshot_reads_status_values_and_falls_back_for_the_history():
    """SHOW GLOBAL STATUS values become numbers; MySQL, without Innodb_history_list_length,
    takes the one read elsewhere."""
    status = {"Innodb_buffer_pool_pages_dirty": "602", "Innodb_buffer_pool_pages_total": "2028",
              "Innodb_data_pending_reads": "0", "Innodb_data_pending_writes": "3", "Innodb_data_pending_fsyncs": "1"}
    s = snapshot(1.5, status, history_length=77)
    assert (s.dirty_pages, s.total_pages, s.history_length, s.pending_io) == (602, 2028, 77, 4)
    assert round(s.dirty_pct, 2) == 29.68
    assert snapshot(0, {**status, "Innodb_history_list_length": "5"}, history_length=77).history_length == 5
    assert snapshot(0, {}).dirty_pct is None and snapshot(0, {}).pending_io is None


def test_history_length_from_engine_status():
    """The TRANSACTIONS section of SHOW ENGINE INNODB STATUS holds the history list length."""
    text = ("------------\nTRANSACTIONS\n------------\nTrx id counter 4113\n"
            "Purge done for trx's n:o < 4110 undo n:o < 0 state: running but idle\n"
            "History list length 250312\nLIST OF TRANSACTIONS FOR EACH SESSION:\n")
    assert history_from_innodb_status(text) == 250312
    assert history_from_innodb_status("no such section") is None


def test_leftovers_are_the_bench_users_running_statements_on_the_runs_database_from_this_host():
    """Only statements of the bench user on the run's database from the worker's host count:
    not the worker's own connection, idle ones, other users, other databases or other hosts."""
    rows = [
        ME,
        SLEEPER,
        Connection(id=32, user="bench", host="127.0.0.1:40101", db="sbtest", command="Killed", time_s=3),
        Connection(id=33, user="bench", host="127.0.0.1:40102", db="sbtest", command="Sleep", time_s=300),
        Connection(id=34, user="root", host="127.0.0.1:40103", db="sbtest", command="Query", time_s=9),
        Connection(id=35, user="bench", host="127.0.0.1:40104", db="other", command="Query", time_s=9),
        Connection(id=36, user="bench", host="10.0.0.9:40105", db="sbtest", command="Query", time_s=9),
        Connection(id=37, user="bench", host="127.0.0.1:40106", db=None, command="Query", time_s=9),
        Connection(id=2, user="system user", host="", db=None, command="Daemon", time_s=0),
    ]
    assert [c.id for c in leftovers(rows, ME, "sbtest")] == [31, 32]


def test_socket_connections_match_each_other():
    """Over the unix socket the host is `localhost` without a port, for the worker and the load."""
    me = Connection(id=1, user="benchfleet", host="localhost", db=None, command="Query", time_s=0)
    load = Connection(id=9, user="benchfleet", host="localhost", db="sbtest", command="Execute", time_s=2)
    assert leftovers([me, load], me, "sbtest") == [load]
    assert client_host("::1:5000") == "::1" and client_host("localhost") == "localhost"


def test_long_statements_are_shortened_when_named():
    """A megabyte statement is cut when a failed run names it."""
    huge = Connection(id=5, user="u", host="h", db="d", command="Query", time_s=1.5, info="SELECT " + "x" * 10_000)
    text = huge.describe()
    assert len(text) < 250 and text.endswith("...)")


def test_window_keeps_what_a_later_decision_needs():
    """A long wait keeps the last STEADY_S seconds and the snapshot before them, nothing older."""
    history = [snap(t / 2) for t in range(100)]
    kept = window(history)
    assert kept[0].elapsed_s == 46.5 and kept[-1].elapsed_s == 49.5
    assert flushing_stopped(kept) == flushing_stopped(history)


#: /proc/net/tcp with the server on 3306 (0CEA) and clients on 50336 (C4A0, connected), 50344
#: (C4A8, FIN_WAIT2: its process was killed) and 50352 (C4B0, a connection to another port).
TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000   106        0 5934 1
   1: 0100007F:C4A0 0100007F:0CEA 01 00000000:00000000 00:00000000 00000000     0        0 7001 1
   2: 0100007F:0CEA 0100007F:C4A0 01 00000000:00000000 00:00000000 00000000   106        0 7002 1
   3: 0100007F:C4A8 0100007F:0CEA 05 00000000:00000000 00:00000000 00000000     0        0 7003 1
   4: 0100007F:C4B0 0100007F:1628 01 00000000:00000000 00:00000000 00000000     0        0 7004 1
"""
TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue
   0: 0000000000000000FFFF00000100007F:C4B8 0000000000000000FFFF00000100007F:0CEA 01 00000000:00000000
"""


def test_live_clients_are_the_connected_sockets_to_the_server_port():
    """Connected client sockets to the server's port count, IPv4 and IPv6; a socket whose
    process died (FIN_WAIT2), the server's own side and other ports do not."""
    assert live_client_ports([TCP, TCP6], 3306) == {50336, 50360}
    assert live_client_ports(["garbage\nnot a table at all\n"], 3306) == set()


def test_only_statements_whose_client_is_gone_are_abandoned():
    """A statement of a live client is never one to end; over a unix socket (the worker's own
    managed server) every leftover is."""
    live = Connection(id=1, user="b", host="127.0.0.1:50336", db="s", command="Query", time_s=5)
    dead = Connection(id=2, user="b", host="127.0.0.1:50344", db="s", command="Query", time_s=5)
    local = Connection(id=3, user="b", host="localhost", db="s", command="Query", time_s=5)
    ports = live_client_ports([TCP], 3306)
    assert abandoned([live, dead, local], ports, managed=False) == [dead]
    assert abandoned([live, dead, local], None, managed=True) == [live, dead, local]
    assert client_port("127.0.0.1:50344") == 50344 and client_port("localhost") is None


def test_a_dsn_targets_socket_clients_are_never_ended():
    """Over a DSN target's unix socket a client's liveness cannot be seen (it may be a user's
    mysql shell), so no leftover there is one to end; only the worker's managed server's are."""
    local = Connection(id=3, user="b", host="localhost", db="s", command="Query", time_s=5)
    assert abandoned([local], None, managed=False) == []
