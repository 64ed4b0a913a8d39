"""Re-run the README's console blocks and say which outputs drifted.

Every ``$ inferlab ...`` line of a ```` ```console ```` block is run (from the repository
root, or the folder of a ``$ cd DIR`` line before it in the block, with the ``inferlab`` next
to this Python) and its output, warnings first, compared line by line with the lines the
README shows under it. A block that elides output (a line ``...``) is compared up to the
elision and after it, and a shown line ending in ``...`` matches any line it starts; commands
that take long or write files can be skipped by a substring (``--skip fleet-day``).

    python scripts/readme_blocks.py                 # report drift, exit 1 if any
    python scripts/readme_blocks.py --only estimate # commands containing 'estimate'
    python scripts/readme_blocks.py --update        # write the new outputs into README.md

Outputs that depend on the machine (timings) drift by nature; read the report before updating.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INFERLAB = Path(sys.executable).with_name("inferlab")


def blocks(lines: list[str]) -> list[tuple[int, int]]:
    """``(first, last)`` line indices inside each console block (fences excluded)."""
    out, start = [], None
    for i, line in enumerate(lines):
        if line.strip() == "```console" and start is None:
            start = i + 1
        elif line.strip() == "```" and start is not None:
            out.append((start, i))
            start = None
    return out


def commands(lines: list[str], first: int, last: int) -> list[tuple[int, int, str, Path]]:
    """``(line of the command, end of its shown output, command, folder)`` of each ``$ inferlab``
    line, run in the folder of the last ``$ cd`` line before it in the block."""
    found = [i for i in range(first, last) if lines[i].startswith("$ ")]
    out, cwd = [], ROOT
    for k, i in enumerate(found):
        if lines[i].startswith("$ cd "):
            cwd = ROOT / lines[i][5:].strip()
        elif lines[i].startswith("$ inferlab "):
            out.append((i, (found[k + 1] if k + 1 < len(found) else last), lines[i][2:], cwd))
    return out


def same(shown: list[str], got: list[str]) -> bool:
    """Line by line, a shown line ending in ``...`` matching any line it starts."""
    return len(shown) == len(got) and all(g == s or s.endswith("...") and g.startswith(s[:-3])
                                          for s, g in zip(shown, got))


def matches(shown: list[str], got: list[str]) -> bool:
    """Whether ``got`` is what ``shown`` shows, a ``...`` line standing for any lines."""
    while shown and not shown[-1].strip():
        shown = shown[:-1]
    if "..." in shown:
        cut = shown.index("...")
        head, tail = shown[:cut], shown[cut + 1:]
        return same(head, got[:len(head)]) and (not tail or same(tail, got[-len(tail):]))
    return same(shown, got)


def run(command: str, cwd: Path, timeout: float) -> list[str]:
    """The command's warnings and errors, then its output (as a terminal shows a run whose
    warnings come before its table)."""
    words = shlex.split(command)
    words[0] = str(INFERLAB)
    words = [w for arg in words for w in (sorted(str(p.relative_to(cwd)) for p in cwd.glob(arg)) or [arg]
                                            if "*" in arg else [arg])]
    done = subprocess.run(words, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return (done.stderr + done.stdout).rstrip("\n").splitlines()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], help="run commands containing this text")
    parser.add_argument("--skip", action="append", default=[], help="skip commands containing this text")
    # (the fleet-day block simulates 1.7 million requests: about 6.5 min on 2 cores)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per command (default 900)")
    parser.add_argument("--update", action="store_true", help="write the new outputs into README.md")
    args = parser.parse_args()
    path = ROOT / "README.md"
    lines = path.read_text(encoding="utf-8").splitlines()
    replacements, drifted, ran = [], 0, 0
    for first, last in blocks(lines):
        for at, end, command, cwd in commands(lines, first, last):
            if args.only and not any(s in command for s in args.only) or any(s in command for s in args.skip):
                continue
            shown = lines[at + 1:end]
            try:
                got = run(command, cwd, args.timeout)
            except subprocess.TimeoutExpired:
                print(f"line {at + 1}: timed out: {command}")
                continue
            ran += 1
            if matches(shown, got):
                continue
            drifted += 1
            print(f"line {at + 1}: {command}")
            for old, new in zip(shown, got):
                if old != new:
                    print(f"  - {old}\n  + {new}")
            if len(shown) != len(got):
                print(f"  ({len(shown)} lines shown, {len(got)} printed)")
            if "..." not in shown:
                replacements.append((at + 1, end, got))
    print(f"{ran} command(s) run, {drifted} drifted")
    if args.update and replacements:
        for start, end, got in sorted(replacements, reverse=True):
            lines[start:end] = got
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"updated {len(replacements)} output(s) in README.md")
    return 1 if drifted else 0


if __name__ == "__main__":
    sys.exit(main())
