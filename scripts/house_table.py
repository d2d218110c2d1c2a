"""The README's house table, generated from the code: one row a folder, from the top layer down.

The layers and their order are declared once, in the import-linter layers contract of ``pyproject.toml``; what each
folder holds is the first paragraph of its ``__init__.py`` docstring. This script writes the table between the
README's ``<!-- house-table -->`` markers (``python scripts/house_table.py --write``); ``tests/test_house.py`` fails
when the README's table differs from what it would write.

Usage (from the repository root)::

    python scripts/house_table.py            # print the table
    python scripts/house_table.py --write    # replace the README's table with it
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "gpusight"
START, END = "<!-- house-table -->", "<!-- /house-table -->"
"""The markers around the table in README.md."""
LAYERS_CONTRACT_TYPE = "layers"


def layer_modules(pyproject: Path) -> list[list[str]]:
    """The layers contract's layers, top first, each a list of its modules (``gpusight.ui``, ...)."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == LAYERS_CONTRACT_TYPE)
    return [[m.strip() for m in re.split(r"[|:]", layer)] for layer in layers]


def summary(init: Path) -> str:
    """The first paragraph of a module's docstring, as one line of Markdown."""
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    text = " ".join(doc.split("\n\n", 1)[0].split())
    text = re.sub(r":(?:mod|class|func|data|attr):`~?([\w.]+)`", lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", text)
    return text.replace("``", "`").replace("|", "\\|")


def _subpackages(folder: Path) -> list[Path]:
    """``folder``'s packages below it, each before its own, in name order."""
    found: list[Path] = []
    for child in sorted(p for p in folder.iterdir() if (p / "__init__.py").is_file()):
        found += [child, *_subpackages(child)]
    return found


def house_rows(repo: Path = REPO) -> list[tuple[str, str]]:
    """(folder, what it holds) for every package folder, top layer first; single modules on one last row."""
    root = repo / PACKAGE
    rows: list[tuple[str, str]] = []
    modules: list[str] = []
    for layer in layer_modules(repo / "pyproject.toml"):
        for name in layer:
            path = root / name.removeprefix(PACKAGE + ".")
            if (path / "__init__.py").is_file():
                for folder in (path, *_subpackages(path)):
                    rows.append((f"`{folder.relative_to(repo).as_posix()}/`", summary(folder / "__init__.py")))
            else:
                modules.append(f"`{path.name}`")
    listed = {row[0] for row in rows}
    missing = [p for p in _subpackages(root) if f"`{p.relative_to(repo).as_posix()}/`" not in listed]
    if missing:
        raise SystemExit(f"house_table: folders in no layer of pyproject.toml: {', '.join(map(str, missing))}")
    rows.append((f"`{PACKAGE}/*.py`", "single modules, each in its layer of `pyproject.toml`, from the top: "
                 + ", ".join(modules)))
    return rows


def house_table(repo: Path = REPO) -> str:
    """The Markdown table."""
    lines = ["| folder | what it holds |", "| --- | --- |"]
    lines += [f"| {folder} | {text} |" for folder, text in house_rows(repo)]
    return "\n".join(lines)


def readme_table(readme: str) -> str:
    """The table between the README's markers."""
    return readme.split(START, 1)[1].split(END, 1)[0].strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--write", action="store_true", help="replace the README's table")
    args = parser.parse_args()
    table = house_table()
    if not args.write:
        print(table)
        return 0
    readme = REPO / "README.md"
    text = readme.read_text(encoding="utf-8")
    before, rest = text.split(START, 1)
    after = rest.split(END, 1)[1]
    readme.write_text(f"{before}{START}\n{table}\n{END}{after}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
