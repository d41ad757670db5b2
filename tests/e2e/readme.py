"""The README's tour as data: its commands and output blocks in the order the README shows them,
and the normalisation that makes a run's output comparable with them.

In the tour section, a ```sh block holds commands a reader types (one a line, their output not
shown there); a ``` block whose first line starts with `$ ` holds commands, each followed by its
output (a trailing `# exit code N` is the exit code it ends with, 0 when not given; a trailing
`&` runs it in the background); any other ``` block is more output of a command already running,
where a line `…` stands for lines not shown.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
TOUR_HEADING = "## A five-minute tour"
ELIDED = "…"

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_EXIT_CODE = re.compile(r"\s+#\s*exit code (\d+)\s*$")
_EXPORT = re.compile(r"`export (\w+)=(\S+)`")
# What varies from run to run: instants, generations (microseconds since the epoch), durations.
_VARYING = (
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|\+00:00)"), "<time>"),
    (re.compile(r"\b\d{15,}\b"), "<generation>"),
    (re.compile(r"-?\b\d+\.\d+s\b"), "<seconds>"),
    # How many events came before depends on when a Stop landed in a turn's tool calls.
    (re.compile(r"\bseq=\d+\b"), "seq=<seq>"),
    # Table columns are as wide as their values, which vary.
    (re.compile(r"(?<=\S) {2,}"), "  "),
)


@dataclass(frozen=True)
class Command:
    """A command of the tour, as the README shows it."""

    line: str
    exit_code: int = 0
    background: bool = False
    output: list[str] | None = None
    """The lines shown after it (`$` blocks); None for a command in a ```sh block."""

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.line)


@dataclass(frozen=True)
class Output:
    """More output of a command already running."""

    lines: list[str]


@dataclass
class Tour:
    """The tour's commands and outputs, taken in order: each `command()` or `output()` must be
    the next one the README shows, and `finished()` that none was left out."""

    steps: list[Command | Output]
    environment: dict[str, str]
    taken: int = field(default=0)

    def command(self, starts: str) -> Command:
        step = self._next()
        where = f"the README's tour shows {step} where the test expects a command `{starts}…`"
        assert isinstance(step, Command), where
        assert step.line.startswith(starts), where
        return step

    def output(self) -> list[str]:
        step = self._next()
        assert isinstance(step, Output), f"the README's tour shows {step} where the test expects output"
        return step.lines

    def output_after(self, starts: str) -> list[str]:
        """The first output block after the next command `starts…`, without taking either."""
        later = self.steps[self.taken :]
        command = next(
            i for i, step in enumerate(later) if isinstance(step, Command) and step.line.startswith(starts)
        )
        return next(step.lines for step in later[command:] if isinstance(step, Output))

    def finished(self) -> None:
        assert self.taken == len(self.steps), f"the test did not run {self.steps[self.taken :]}"

    def _next(self) -> Command | Output:
        assert self.taken < len(self.steps), "the README's tour has no more steps"
        self.taken += 1
        return self.steps[self.taken - 1]


def tour(readme: Path = README) -> Tour:
    text = readme.read_text(encoding="utf-8")
    section = text[text.index(TOUR_HEADING) :]
    section = section[: section.find("\n## ", 1)]
    steps: list[Command | Output] = []
    for fence in _FENCE.finditer(section):
        language, body = fence[1], fence[2].rstrip("\n").split("\n")
        if language == "sh":
            steps.extend(_command(line) for line in body if line.strip())
        elif body[0].startswith("$ "):
            steps.extend(_shell_session(body))
        else:
            steps.append(Output(body))
    return Tour(steps, dict(_EXPORT.findall(section)))


def _command(line: str, output: list[str] | None = None) -> Command:
    exit_code = _EXIT_CODE.search(line)
    line = _EXIT_CODE.sub("", line).strip()
    background = line.endswith("&")
    return Command(
        line.removesuffix("&").strip(),
        exit_code=int(exit_code[1]) if exit_code else 0,
        background=background,
        output=output,
    )


def _shell_session(lines: list[str]) -> list[Command]:
    commands: list[Command] = []
    for line in lines:
        if line.startswith("$ "):
            commands.append(_command(line.removeprefix("$ "), []))
        else:
            shown = commands[-1].output
            assert shown is not None
            shown.append(line)
    return commands


def normalised(line: str) -> str:
    for varying, placeholder in _VARYING:
        line = varying.sub(placeholder, line)
    return line.rstrip()


def matches(shown: list[str], printed: list[str]) -> bool:
    """Whether `printed` is what `shown` shows, once normalised: line for line, where each `…`
    of `shown` stands for any number of lines (at least one)."""
    wanted, got = [normalised(line) for line in shown], [normalised(line) for line in printed]
    return _match(wanted, got)


def _match(wanted: list[str], got: list[str]) -> bool:
    if not wanted:
        return not got
    if wanted[0] == ELIDED:
        return any(_match(wanted[1:], got[skip:]) for skip in range(1, len(got) + 1))
    return bool(got) and wanted[0] == got[0] and _match(wanted[1:], got[1:])
