"""`collector import` reads a file someone else wrote: every malformed one (truncated, wrong types,
nested without end) is refused with a message naming the file and what is wrong, never a traceback."""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest

from services.common.errors import ExportFileError
from services.common.store.campaign_file import MAX_DEPTH, decode_export, too_deep

from tests.unit.test_report_leaks import SECRET_SPEC, _export, recorded

#: A well-formed export of a small campaign, as parsed JSON.
GOOD = json.loads(_export(recorded(SECRET_SPEC)).encode())
#: Values of every JSON type, and one nested far deeper than any export.
WRONG_VALUES: tuple[Any, ...] = (None, True, -1, 1e308, "x" * 300, [], {}, [[["deep"]]], {"k": {"k": {}}})


def _paths(value: Any, path: tuple = ()) -> Iterator[tuple]:
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value[:2]):  # two items of each list: the rest are alike
            yield from _paths(v, path + (i,))


def _replaced(doc: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    out = dict(doc) if isinstance(doc, dict) else list(doc)
    out[path[0]] = _replaced(doc[path[0]], path[1:], new)
    return out


def test_the_sample_export_itself_decodes():
    """The file every other case here spoils is a good export."""
    assert decode_export(json.dumps(GOOD), "good.json").campaign.campaign_id == "leaky-1"


def test_a_wrong_type_anywhere_is_refused_naming_the_file_or_decodes():
    """Each value of a real export replaced by each JSON type in turn: the file either still decodes
    (a type the field accepts) or is refused with ExportFileError naming the file; nothing else escapes."""
    tried = 0
    for path in _paths(GOOD):
        for value in WRONG_VALUES:
            text = json.dumps(_replaced(GOOD, path, value))
            try:
                decode_export(text, "spoiled.json")
            except ExportFileError as e:
                assert str(e).startswith("spoiled.json: "), (path, value, str(e))
            tried += 1
    assert tried > 1000


@pytest.mark.parametrize("text, says", [
    (json.dumps(GOOD)[:-40], "not JSON: "),
    ("", "not JSON: "),
    (b"\xff\xfe{}", "not JSON: "),
    ("[" * 100_000 + "]" * 100_000, f"nested deeper than {MAX_DEPTH} levels"),
    ('{"campaign": ' + '{"a": ' * 200 + "1" + "}" * 200 + "}", "campaign.a.a.a"),
    (json.dumps({**GOOD, "runs": "many"}), "runs: Input should be a valid list"),
    (json.dumps({**GOOD, "campaign": {**GOOD["campaign"], "total_runs": "eight"}}), "campaign.total_runs: "),
], ids=["truncated", "empty", "not UTF-8", "100,000-deep list", "200-deep mapping", "runs a string",
        "total_runs a string"])
def test_a_malformed_file_is_refused_saying_what_is_wrong(text, says):
    """Truncated, empty, undecodable, absurdly nested or mistyped: an ExportFileError that names the
    file and the trouble."""
    with pytest.raises(ExportFileError) as e:
        decode_export(text, "bad.json")
    assert str(e.value).startswith("bad.json: ") and says in str(e.value)


def test_depth_is_measured_without_recursion():
    """A million-deep structure (built without json) is measured without exhausting the stack, and
    the path it names stays short."""
    deep: Any = 1
    for _ in range(1_000_000):
        deep = [deep]
    where = too_deep({"campaign": deep})
    assert where is not None and where.startswith("campaign[0][0]") and len(where) < 200
    assert too_deep(GOOD) is None
