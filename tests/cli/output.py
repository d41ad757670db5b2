"""Reading what the text output of `turngate` shows: blocks of `label  value` lines."""

from __future__ import annotations

import re


def fields(block: str) -> dict[str, str]:
    """A block of `label  value` lines (a title line, without two spaces, is skipped)."""
    pairs = (re.match(r"^\s*(\S.*?)\s{2,}(.*)$", line) for line in block.splitlines())
    return {pair[1]: pair[2] for pair in pairs if pair}


def sections(out: str) -> dict[str, dict[str, str]]:
    """Blocks separated by blank lines, by their title line ('' for the first, untitled one)."""
    first, *titled = out.split("\n\n")
    return {"": fields(first)} | {block.split("\n", 1)[0]: fields(block) for block in titled}


def seconds(text: str) -> float:
    return float(text.removesuffix("s"))
