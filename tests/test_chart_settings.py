"""The config file's [charts] section: column period and motion, read from real files, reaching the real CLI's
chart grid and app; a bad value is one config warning and its default."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpusight.config_file import read_config
from gpusight.sampling.chart_settings import ChartSettings, chart_settings_from_config
from support.terminal import PtyGpusight

DEFAULT = ChartSettings(1.0, "page")


def settings_of(tmp_path: Path, text: str) -> tuple[ChartSettings, list[str]]:
    path = tmp_path / "config.toml"
    path.write_text(text)
    document, problems = read_config(path)
    assert problems == []
    return chart_settings_from_config(document, str(path))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", DEFAULT),
        ("[charts]\n", DEFAULT),
        ("[advice]\nlow_util_percent = 40\n", DEFAULT),
        ("[charts]\ncolumn_seconds = 2.5\n", ChartSettings(2.5, "page")),
        ("[charts]\ncolumn_seconds = 5\n", ChartSettings(5.0, "page")),
        ("[charts]\ncolumn_seconds = 0.1\n", ChartSettings(0.1, "page")),
        ("[charts]\ncolumn_seconds = 600\n", ChartSettings(600.0, "page")),
        ('[charts]\nmotion = "scroll"\n', ChartSettings(1.0, "scroll")),
        ('[charts]\nmotion = "page"\ncolumn_seconds = 10\n', ChartSettings(10.0, "page")),
    ],
    ids=["no-file-content", "empty-table", "other-sections", "float", "integer", "shortest", "longest", "scroll",
         "both"],
)
def test_good_chart_settings_are_read_without_a_warning(tmp_path, text, expected):
    assert settings_of(tmp_path, text) == (expected, [])


@pytest.mark.parametrize(
    ("text", "expected", "warning"),
    [
        ("[charts]\ncolumn_seconds = 0.05\n", DEFAULT,
         "[charts] column_seconds must be from 0.1 to 600 seconds, not 0.05; default 1 s kept"),
        ("[charts]\ncolumn_seconds = 601\n", DEFAULT,
         "[charts] column_seconds must be from 0.1 to 600 seconds, not 601; default 1 s kept"),
        ("[charts]\ncolumn_seconds = -1\n", DEFAULT,
         "[charts] column_seconds must be from 0.1 to 600 seconds, not -1; default 1 s kept"),
        ("[charts]\ncolumn_seconds = nan\n", DEFAULT,
         "[charts] column_seconds must be from 0.1 to 600 seconds, not nan; default 1 s kept"),
        ("[charts]\ncolumn_seconds = inf\n", DEFAULT,
         "[charts] column_seconds must be from 0.1 to 600 seconds, not inf; default 1 s kept"),
        ('[charts]\ncolumn_seconds = "2"\n', DEFAULT,
         "[charts] column_seconds must be a number of seconds, not str; default 1 s kept"),
        ("[charts]\ncolumn_seconds = true\n", DEFAULT,
         "[charts] column_seconds must be a number of seconds, not bool; default 1 s kept"),
        ('[charts]\nmotion = "wobble"\ncolumn_seconds = 3\n', ChartSettings(3.0, "page"),
         "[charts] motion must be \"page\" or \"scroll\", not 'wobble'; default \"page\" kept"),
        ('[charts]\nmotion = "Scroll"\n', DEFAULT,
         "[charts] motion must be \"page\" or \"scroll\", not 'Scroll'; default \"page\" kept"),
        ("[charts]\nmotion = 1\n", DEFAULT,
         "[charts] motion must be \"page\" or \"scroll\", not int; default \"page\" kept"),
        ('[charts]\nmotion = "scroll"\nspeed = 3\n', ChartSettings(1.0, "scroll"), "[charts] unknown key 'speed'; ignored"),
        ("charts = 3\n", DEFAULT, "[charts] must be a table; chart defaults used"),
    ],
    ids=["too-short", "too-long", "negative", "nan", "inf", "string", "bool", "unknown-motion", "motion-case",
         "motion-type", "unknown-key", "not-a-table"],
)
def test_a_bad_chart_setting_is_one_warning_and_its_default(tmp_path, text, expected, warning):
    settings, warnings = settings_of(tmp_path, text)
    assert settings == expected
    assert warnings == [f"{tmp_path / 'config.toml'}: {warning}"]


def gpusight(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpusight", *args], capture_output=True, text=True, timeout=60)


def test_chart_warnings_reach_the_cli_errors_like_other_config_warnings(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[advice]\nlow_util_percent = "x"\n[charts]\ncolumn_seconds = 0\nmotion = "sideways"\n')
    out = gpusight("--demo", "healthy", "--json", "--config", str(path))
    assert out.returncode == 0, out.stderr
    messages = [e["message"] for e in json.loads(out.stdout)["errors"] if e["scope"] == "config"]
    assert [m for m in messages if "[charts]" in m] == [
        f"{path}: [charts] column_seconds must be from 0.1 to 600 seconds, not 0; default 1 s kept",
        f"{path}: [charts] motion must be \"page\" or \"scroll\", not 'sideways'; default \"page\" kept",
    ]
    assert any("[advice]" in m for m in messages)


def test_good_chart_settings_bring_no_warning_to_the_cli(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[charts]\ncolumn_seconds = 2\nmotion = "scroll"\n')
    out = gpusight("--demo", "healthy", "--json", "--config", str(path))
    assert out.returncode == 0, out.stderr
    assert [e for e in json.loads(out.stdout)["errors"] if e["scope"] == "config"] == []


@pytest.mark.parametrize(
    ("text", "column_s", "paged"),
    [
        ('[charts]\ncolumn_seconds = 2.5\nmotion = "scroll"\n', 2.5, False),
        ("[charts]\ncolumn_seconds = 30\n", 30.0, True),
        ('[charts]\ncolumn_seconds = 1000\nmotion = "jump"\n', 1.0, True),
        ("", 1.0, True),
    ],
    ids=["scroll-2.5s", "page-30s", "bad-values-defaults", "no-section"],
)
def test_the_live_ui_gets_the_configured_grid_and_motion(tmp_path, text, column_s, paged):
    config = tmp_path / "config.toml"
    config.write_text(text)
    stats = tmp_path / "stats.json"
    env = dict(os.environ, GPUSIGHT_STATS_FILE=str(stats))
    with PtyGpusight((100, 30), controlling=False, env=env, args=("--demo", "healthy", "--config", str(config))) as app:
        app.wait_up()
        assert app.quit() == 0
    written = json.loads(stats.read_text())
    assert (written["chart_column_s"], written["chart_paged"]) == (column_s, paged)
