"""One meaning per flag across the three CLIs: `--json` prints JSON, a file is `--out`, old
spellings warn and still work, help shows no developer notes, and shell completion is generated."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from services.collector import cli as collector_cli
from services.common import cli
from services.scheduler import cli as scheduler_cli
from services.worker import cli as worker_cli

ROOT = Path(__file__).resolve().parents[2]


def _parsers() -> list[argparse.ArgumentParser]:
    found = []

    def walk(p: argparse.ArgumentParser) -> None:
        found.append(p)
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub in a.choices.values():
                    walk(sub)

    for p in (collector_cli._parser(), scheduler_cli._parser(), worker_cli._parser(), worker_cli._data_parser("prepare"),
              worker_cli._builds_parser(), worker_cli._completion_parser()):
        walk(p)
    return found


#: What a developer's note looks like: a source path, a module, a test, an issue marker.
DEV_NOTE = re.compile(r"\.py\b|services/|collector/commands|tests/|\(tests\b|TODO|FIXME|XXX|dispatch", re.I)


def test_help_has_no_developer_notes():
    """No `--help` of any command names source files, modules or tests."""
    for p in _parsers():
        text = p.format_help()
        assert not DEV_NOTE.search(text), f"{p.prog} --help: {DEV_NOTE.search(text).group(0)!r}"


def test_json_is_a_boolean_everywhere_and_a_file_is_out():
    """Every `--json` shown in help takes no value; every shown option taking a FILE is `--out`."""
    for p in _parsers():
        for a in p._actions:
            if a.help == argparse.SUPPRESS:
                continue
            if "--json" in a.option_strings:
                assert a.nargs == 0, f"{p.prog} --json takes a value"
            if a.option_strings and a.metavar == "FILE" and not any("password-file" in o or "tarball" in o for o in a.option_strings):
                assert a.option_strings == ["--out"], f"{p.prog} {a.option_strings} takes a FILE"


def test_an_old_spelling_warns_and_still_works(capsys):
    """`export --json FILE` and `report --html FILE` still set what they did, with a warning on stderr;
    they are not in help."""
    p = collector_cli._parser()
    args = p.parse_args(["export", "c1", "--json", "c1.json"])
    assert args.out == "c1.json"
    assert "warning: --json is deprecated and will be removed: use --out FILE" in capsys.readouterr().err
    args = p.parse_args(["report", "c1", "--html", "page.html"])
    assert args.html == "page.html" and "use a second `report --format html --out FILE`" in capsys.readouterr().err
    assert "--html" not in p._subparsers._group_actions[0].choices["report"].format_help()
    assert p.parse_args(["report", "c1", "--json"]).fmt == "json"
    assert p.parse_args(["export", "c1"]).out is None and capsys.readouterr().err == ""


@pytest.mark.parametrize("argv", [["report", "c1", "--format", "html"], ["compare", "a", "b", "--format", "html"]])
def test_report_and_compare_need_out_for_html_alike(argv, capsys):
    """An HTML page goes to a file in both commands: without --out, exit 2 before reading anything."""
    assert collector_cli.main(argv) == cli.EXIT_USAGE
    assert "error: --format html writes a file: give --out FILE" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
@pytest.mark.parametrize("line, expected", [
    ("collector rep", {"report"}),
    ("collector compare a b --for", {"--format"}),
    ("collector report c --format ", {"text", "markdown", "csv", "json", "ods", "html"}),
    ("worker builds ", {"add", "list", "remove"}),
    ("scheduler submit spec.yaml --wai", {"--wait"}),
])
def test_bash_completion_completes_commands_flags_and_choices(line, expected):
    """The generated script, loaded in a real bash, completes subcommands, flags and a flag's choices."""
    prog = line.split()[0]
    words = line.split(" ")
    script = subprocess.run([sys.executable, "-m", f"services.{prog}.cli", "completion", "bash"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    driver = (script + "\nCOMP_WORDS=(" + " ".join(f"'{w}'" for w in words) + f")\nCOMP_CWORD={len(words) - 1}\n"
              f"_benchfleet_{prog}\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n")
    out = subprocess.run(["bash", "-c", driver], capture_output=True, text=True, check=True).stdout
    assert set(out.split()) == expected


def test_zsh_completion_is_the_bash_script_through_bashcompinit(capsys):
    """zsh gets the same function through bashcompinit; another shell is refused (exit 2)."""
    assert scheduler_cli.main(["completion", "zsh"]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "bashcompinit" in out and "complete -o default -F _benchfleet_scheduler scheduler" in out
    with pytest.raises(SystemExit) as e:
        worker_cli.main(["completion", "fish"])
    assert e.value.code == cli.EXIT_USAGE
