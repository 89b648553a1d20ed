"""Spec fuzzing: whatever a user writes, `scheduler validate|submit` answers exit 0 or exit 2 with
`error:` lines naming a field, publishes nothing for an invalid spec, and never shows a traceback."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from services.scheduler import cli

VALID = {
    "name": "fuzz",
    "targets": [{"name": "A", "host": "127.0.0.1", "port": 3306, "user": "bench", "database": "sbtest"}],
    "workloads": ["oltp_point_select", {"name": "oltp_read_only", "options": {"range_size": 10}}],
    "data": {"tables": 1, "table_size": 100},
    "threads": [1, 4],
    "duration": "5s",
    "warmup": "1s",
    "repeat": 2,
}

junk = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=True) |
    st.text(max_size=12) | st.sampled_from(["", "0", "-1", "5x", "1h99m", "off", "${X}", "a b", "'; DROP", "\x00"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
PATHS = [("name",), ("targets",), ("targets", 0), ("targets", 0, "port"), ("targets", 0, "name"),
         ("targets", 0, "database"), ("targets", 0, "password"), ("targets", 0, "kind"), ("workloads",),
         ("workloads", 1, "options"), ("workloads", 1, "options", "range_size"), ("data",), ("data", "engine"),
         ("data", "tables"), ("threads",), ("threads", 0), ("duration",), ("warmup",), ("repeat",), ("seed",),
         ("baseline",), ("pool",), ("spec_version",), ("driver",), ("extra_field",)]


def _mutate(spec: dict, path: tuple, value: object, delete: bool) -> dict:
    import copy

    out = copy.deepcopy(spec)
    node = out
    for part in path[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return out
    try:
        if delete:
            del node[path[-1]]
        else:
            node[path[-1]] = value
    except (KeyError, IndexError, TypeError):
        pass
    return out


class Refuse:
    """Stands in for Store and Bus: an invalid spec must never get as far as connecting."""

    def __init__(self, *a, **k):
        raise AssertionError("an invalid spec reached the results DB or the broker")


@pytest.fixture
def no_io(monkeypatch):
    monkeypatch.setattr(cli, "Store", Refuse)
    monkeypatch.setattr(cli, "RabbitBus", Refuse)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.sampled_from(PATHS), junk, st.booleans()), min_size=1, max_size=3),
       command=st.sampled_from(["validate", "submit"]))
# An option key that is a line break once split its problem's line in two.
@example(edits=[(("workloads", 1, "options"), {"\n": False}, False)], command="validate")
def test_mutated_specs_exit_2_naming_a_field(edits, command, tmp_path_factory, capsys, no_io):
    """A spec with random fields replaced or removed: exit 0 (still valid: then validate only) or
    exit 2 with one `error: FILE[:LINE]: FIELD: message` line per problem, and no traceback."""
    spec = VALID
    for path, value, delete in edits:
        spec = _mutate(spec, path, value, delete)
    f = tmp_path_factory.mktemp("fuzz") / "spec.yaml"
    f.write_text(yaml.safe_dump(spec, allow_unicode=True))
    try:
        code = cli.main([command, str(f)])
    except AssertionError:
        code = None  # a valid spec reached the (refused) DB: fine for submit, checked below
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code == 2:
        lines = [l for l in err.splitlines() if l.strip()]
        assert lines and all(l.startswith(f"error: {f}") for l in lines), err
        assert all(len(l.split(": ")) >= 3 for l in lines), err  # error: where: field: message
    else:
        assert code in (0, None), (code, err)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=200) | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_arbitrary_text_exits_2_without_traceback(text, tmp_path_factory, capsys, no_io):
    """Any file content at all: exit 2 with an `error:` line, never a traceback."""
    f = tmp_path_factory.mktemp("fuzz") / "spec.yaml"
    f.write_text(text, encoding="utf-8", errors="surrogateescape")
    code = cli.main(["validate", str(f)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "Traceback" not in err, err
