"""Shell completion for the three CLIs (`scheduler|worker|collector completion bash|zsh`), generated
from their argparse parsers so it never lags a new flag. zsh loads the bash script through its
bashcompinit; no dependency beyond the shells themselves."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

SHELLS = ("bash", "zsh")


@dataclass(frozen=True)
class Option:
    """One flag's spellings, and its choices when it has a fixed set of values."""

    flags: tuple[str, ...]
    takes_value: bool
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Command:
    """A command (the program, or one of its subcommands) with its flags and subcommands."""

    name: str
    options: tuple[Option, ...]
    commands: tuple["Command", ...] = ()


def command_of(name: str, parser: argparse.ArgumentParser, extra: tuple[Command, ...] = ()) -> Command:
    """The command tree of ``parser`` (deprecated spellings, hidden from --help, left out too)."""
    options, commands = [], list(extra)
    # argparse has no public way to list a parser's actions; _actions has been stable since 3.2.
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helped = {a.dest for a in action._choices_actions}
            commands += [command_of(n, p) for n, p in action.choices.items() if n in helped]
        elif action.option_strings and action.help != argparse.SUPPRESS:
            choices = tuple(str(c) for c in action.choices) if action.choices else ()
            options.append(Option(tuple(action.option_strings), action.nargs != 0, choices))
    return Command(name, tuple(options), tuple(commands))


def _fn(prog: str) -> str:
    return "_benchfleet_" + re.sub(r"\W", "_", prog)


def _paths(cmd: Command, prefix: str = "") -> list[tuple[str, Command]]:
    here = [(prefix, cmd)]
    for sub in cmd.commands:
        here += _paths(sub, f"{prefix} {sub.name}".strip())
    return here


def bash_script(root: Command) -> str:
    """A bash completion function for ``root``: a flag's choices after it, flags after a dash,
    subcommand names where the command has them, else file names (specs, export files)."""
    fn = _fn(root.name)
    cases = []
    for path, cmd in _paths(root):
        words = " ".join([c.name for c in cmd.commands] + [f for o in cmd.options for f in o.flags])
        choice_cases = "".join(f"        {'|'.join(o.flags)}) choices='{' '.join(o.choices)}';;\n"
                               for o in cmd.options if o.choices)
        subs = " ".join(c.name for c in cmd.commands)
        cases.append(f"    '{path}')\n      subs='{subs}'; words='{words}'; choices=''\n"
                     f"      case $prev in\n{choice_cases}      esac;;\n")
    return (f"# bash completion for {root.name} (benchfleet): eval \"$({root.name} completion bash)\"\n"
            f"{fn}_level() {{\n"
            "  case $path in\n"
            + "".join(cases) +
            "  esac\n"
            "}\n"
            f"{fn}() {{\n"
            "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} path='' subs words choices i w\n"
            "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
            "    w=${COMP_WORDS[i]}\n"
            f"    {fn}_level\n"
            "    case \" $subs \" in *\" $w \"*) path=${path:+$path }$w;; esac\n"
            "  done\n"
            f"  {fn}_level\n"
            "  if [[ -n $choices ]]; then\n"
            "    COMPREPLY=($(compgen -W \"$choices\" -- \"$cur\"))\n"
            "  elif [[ $cur == -* ]]; then\n"
            "    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
            "  elif [[ -n $subs ]]; then\n"
            "    COMPREPLY=($(compgen -W \"$subs\" -- \"$cur\"))\n"
            "  fi\n"
            "}\n"
            f"complete -o default -F {fn} {root.name}\n")


def script(shell: str, root: Command) -> str:
    """The completion script of ``root`` for ``shell`` (bash or zsh)."""
    if shell not in SHELLS:
        raise ValueError(f"shell: {shell!r} is not one of {', '.join(SHELLS)}")
    text = bash_script(root)
    if shell == "zsh":
        # zsh runs bash completion functions through bashcompinit: one script for both shells.
        text = (f"# zsh completion for {root.name} (benchfleet): eval \"$({root.name} completion zsh)\"\n"
                "autoload -U +X compinit && compinit\nautoload -U +X bashcompinit && bashcompinit\n" + text)
    return text
