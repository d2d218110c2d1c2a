"""The house keeps its shape: small modules, folders of a readable size, no import circles, one face per vendor, and
README tables that say what the code declares.

Each test reads the tree as it is, so a module that grows past the cap, a circle, a vendor that is not closed or a
README that lags behind the code fails here, with what to change.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gpusight.backends.interface import BackendOptions, Roots
from gpusight.backends.registry import BACKENDS
from gpusight.cli import main
from gpusight.snapshot import model

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "gpusight"
README = (REPO / "README.md").read_text(encoding="utf-8")
MAX_MODULE_LINES = 800
"""No module of the package is longer."""
MAX_FOLDER_MODULES = 25
"""No package folder holds more modules directly..."""
FOLDERS_OVER_THE_CAP = {"gpusight/advice/rules"}
"""...except these, by design (one file a rule)."""
VENDORS = ("nvml", "amdgpu", "intel")


def _script(name: str) -> ModuleType:
    """A script of ``scripts/`` imported as a module."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _import_graph(root: Path, prefix: str) -> dict[str, set[str]]:
    """Module -> the modules of the same tree it imports anywhere in its body (lazy imports too)."""
    modules: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join((prefix, *parts) if prefix else parts).removesuffix(".__init__")
        modules[name] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            graph[name] |= {target for target in targets if target in modules and target != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles (strongly connected sets of two or more modules), Tarjan's way."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in graph[module]:
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            members = []
            while not members or members[-1] != module:
                members.append(stack.pop())
            if len(members) > 1:
                circles.append(sorted(members))

    for module in graph:
        if module not in order:
            visit(module)
    return circles


def test_the_import_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize(("root", "prefix"), [(PACKAGE, "gpusight"), (REPO / "benchmarks", "")])
def test_no_import_circles(root, prefix):
    assert _circles(_import_graph(root, prefix)) == []


def test_no_module_is_over_the_line_cap():
    long = {str(path.relative_to(REPO)): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}, f"split these modules (at most {MAX_MODULE_LINES} lines each)"


def test_no_folder_holds_more_than_the_cap_of_modules():
    crowded = {}
    for init in PACKAGE.rglob("__init__.py"):
        folder = init.parent
        count = sum(1 for path in folder.glob("*.py") if path.name != "__init__.py")
        if count > MAX_FOLDER_MODULES and folder.relative_to(REPO).as_posix() not in FOLDERS_OVER_THE_CAP:
            crowded[folder.relative_to(REPO).as_posix()] = count
    assert crowded == {}, f"split these folders (at most {MAX_FOLDER_MODULES} modules each)"


def test_every_vendor_package_has_the_same_face():
    for vendor in VENDORS:
        folder = PACKAGE / "backends" / vendor
        assert (folder / "entry.py").is_file() and (folder / "backend.py").is_file(), vendor
    found = {p.parent.name for p in (PACKAGE / "backends").glob("*/entry.py")}
    assert found == set(VENDORS), "a vendor package was added: list it here and in the contracts of pyproject.toml"
    assert [entry.name for entry in BACKENDS] == list(VENDORS)


@pytest.mark.parametrize("entry", BACKENDS, ids=lambda e: e.name)
def test_each_entry_opens_its_backend_class_under_its_own_name(entry, tmp_path):
    assert entry.backend.startswith(f"gpusight.backends.{entry.name}.backend:")
    backend = entry.open(BackendOptions(Roots(tmp_path, tmp_path)))
    try:
        assert (backend.name, backend.vendor) == (entry.name, entry.vendor)
    finally:
        backend.close()


def test_listing_the_backends_loads_no_vendors_reading_code(tmp_path):
    # Listing the registry and asking each vendor whether its GPUs are present (as --backend auto does on a
    # machine with none) imports every entry module and no backend module, and not pynvml.
    code = ("import sys\nfrom pathlib import Path\nfrom gpusight.backends.interface import Roots\n"
            "from gpusight.backends.registry import BACKENDS\n"
            f"print([e.present(Roots(Path({str(tmp_path)!r}), Path({str(tmp_path)!r}))) for e in BACKENDS])\n"
            "print(sorted(m for m in sys.modules if m.startswith('gpusight.backends.') or m == 'pynvml'))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    present, loaded = result.stdout.splitlines()
    assert present == "[True, False, False]"
    vendor_modules = {m for m in ast.literal_eval(loaded) if m.split(".")[2:3] and m.split(".")[2] in VENDORS}
    assert vendor_modules == {f"gpusight.backends.{v}{part}" for v in VENDORS for part in ("", ".entry")}
    assert "pynvml" not in loaded


def test_every_vendor_package_is_named_in_the_vendor_contracts():
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    for contract in ("The vendors' backends and the host source know nothing of each other",
                     "A vendor's package is closed"):
        block = text.split(contract, 1)[1].split("[[tool.importlinter.contracts]]", 1)[0]
        assert all(f'"gpusight.backends.{vendor}"' in block for vendor in VENDORS), contract


def test_the_readme_house_table_is_the_one_the_code_declares():
    house = _script("house_table")
    assert house.readme_table(README) == house.house_table(REPO), "run: python scripts/house_table.py --write"


# -- the README's JSON contract ----------------------------------------------------------------------------------

def _contract_rows() -> dict[str, str]:
    """The JSON contract table: key (``devices[]``) -> its content cell."""
    section = README.split("## The JSON contract", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+(?:\[\])?)` \| (.*) \|$", section, flags=re.MULTILINE)
    return dict(rows)


def _braced(text: str, after: str = "") -> list[str]:
    """The names in the first ``{a, b[], ...}`` of ``text`` (after ``after``), without their ``[]``."""
    match = re.search(re.escape(after) + r"`\{([^}]*)\}`", text)
    assert match is not None, f"no {{...}} list after {after!r}"
    return [name.strip().removesuffix("[]") for name in match.group(1).split(",")]


def _fields(cls: type) -> list[str]:
    return [field.name for field in dataclasses.fields(cls)]


def test_the_readme_json_contract_lists_every_key_json_prints(capsys):
    assert main(["--demo", "faulty", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    rows = _contract_rows()
    assert {key.removesuffix("[]") for key in rows} == set(printed) == set(_fields(model.Snapshot))
    device_keys = set().union(*(device.keys() for device in printed["devices"]))
    assert set(_braced(rows["devices[]"])) == device_keys


@pytest.mark.parametrize(("key", "cls", "after"), [
    ("driver", model.DriverInfo, ""),
    ("host", model.HostSample, ""),
    ("devices[]", model.DeviceSample, ""),
    ("devices[]", model.DeviceHealth, "`health` is "),
    ("mig_devices[]", model.MigDeviceSample, ""),
    ("processes[]", model.ProcessSample, ""),
    ("processes[]", model.ContainerSample, "else "),
    ("jobs[]", model.JobSample, ""),
    ("advice[]", model.Advice, ""),
    ("errors[]", model.ErrorNote, ""),
], ids=lambda value: value.__name__ if isinstance(value, type) else None)
def test_the_readme_json_contract_lists_each_record_as_the_model_declares_it(key, cls, after):
    assert _braced(_contract_rows()[key], after) == _fields(cls)


def test_the_readme_json_contract_names_the_current_schema():
    assert f"(currently {model.SCHEMA_VERSION};" in _contract_rows()["schema"]
