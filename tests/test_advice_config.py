"""Advice thresholds from config.toml: overrides apply, bad entries warn and keep defaults, never a crash."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpusight.advice.config import Thresholds, load_thresholds
from gpusight.advice.engine import AdviceEngine
from gpusight.config_file import config_path
from gpusight.sampling.history import History
from gpusight.snapshot.model import (
    DeviceSample,
    HostSample,
    ProcessRole,
    ProcessSample,
    Snapshot,
)


@pytest.fixture
def xdg(tmp_path, monkeypatch) -> Path:
    """An XDG_CONFIG_HOME in tmp; returns where config.toml goes."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "gpusight").mkdir()
    return tmp_path / "gpusight" / "config.toml"


def test_config_overrides_thresholds(xdg):
    xdg.write_text("[advice]\nlow_util_percent = 40\nfew_workers = 3\nwindow_s = 20.5\n")
    thresholds, warnings = load_thresholds()
    assert warnings == []
    assert thresholds.low_util_percent == 40.0 and isinstance(thresholds.low_util_percent, float)
    assert thresholds.few_workers == 3
    assert thresholds.window_s == 20.5
    assert thresholds.healthy_util_percent == Thresholds().healthy_util_percent


def test_missing_file_means_defaults(xdg):
    assert load_thresholds() == (Thresholds(), [])


def test_file_without_advice_section_means_defaults(xdg):
    xdg.write_text('[ui]\ntheme = "dark"\n')
    assert load_thresholds() == (Thresholds(), [])


def test_wrong_types_and_unknown_keys_warn_and_keep_defaults(xdg):
    xdg.write_text(
        "[advice]\n"
        'low_util_percent = "high"\n'
        "few_workers = 2.5\n"
        "hold_s = true\n"
        "clear_s = -1\n"
        "bogus_key = 1\n"
        "iowait_percent = 12\n"
    )
    thresholds, warnings = load_thresholds()
    defaults = Thresholds()
    assert thresholds == dataclasses.replace(defaults, iowait_percent=12.0)
    assert len(warnings) == 5
    for key in ("low_util_percent", "few_workers", "hold_s", "clear_s", "bogus_key"):
        assert sum(key in w for w in warnings) == 1, (key, warnings)
    assert all(str(xdg) in w for w in warnings)


def test_invalid_toml_warns_once(xdg):
    xdg.write_text("[advice\nlow_util_percent = \n")
    thresholds, warnings = load_thresholds()
    assert thresholds == Thresholds()
    assert len(warnings) == 1 and "invalid TOML" in warnings[0]


def test_advice_that_is_not_a_table_warns(xdg):
    xdg.write_text("advice = 3\n")
    thresholds, warnings = load_thresholds()
    assert thresholds == Thresholds()
    assert len(warnings) == 1 and "table" in warnings[0]


def test_unreadable_config_warns(xdg):
    xdg.mkdir()  # a directory where the file should be
    thresholds, warnings = load_thresholds()
    assert thresholds == Thresholds() and len(warnings) == 1


def test_explicit_path_wins(tmp_path, xdg):
    xdg.write_text("[advice]\nlow_util_percent = 40\n")
    other = tmp_path / "other.toml"
    other.write_text("[advice]\nlow_util_percent = 30\n")
    assert load_thresholds(other)[0].low_util_percent == 30.0


def test_default_location_without_xdg(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config_path() == tmp_path / ".config" / "gpusight" / "config.toml"
    (tmp_path / ".config" / "gpusight").mkdir(parents=True)
    config_path().write_text("[advice]\nhealthy_util_percent = 80\n")
    assert load_thresholds()[0].healthy_util_percent == 80.0


def test_every_threshold_is_documented_in_the_docs():
    doc = (Path(__file__).parent.parent / "docs" / "advice.md").read_text()
    for field in dataclasses.fields(Thresholds):
        assert f"`{field.name}`" in doc, field.name


def _input_bound_advice(thresholds):
    history, engine = History(), AdviceEngine(thresholds)
    procs = [ProcessSample(pid=100, device_index=0, cpu_percent=30.0, num_workers=4)]
    procs += [ProcessSample(pid=200 + k, role=ProcessRole.DATALOADER_WORKER, device_index=0, trainer_pid=100, cpu_percent=99.0) for k in range(4)]
    advice = ()
    for step in range(60 * 4):
        s = Snapshot(
            1000.0 + step / 4,
            "demo",
            HostSample(cpu_percent_per_core=(100.0,) * 4 + (5.0,) * 12, iowait_percent=0.0),
            devices=(DeviceSample(index=0, utilization_gpu_percent=35.0),),
            processes=tuple(procs),
        )
        history.append(s)
        advice = engine(s, history)
    return {a.id for a in advice}


def test_loaded_threshold_changes_what_the_engine_says(xdg):
    assert "input_bound:gpu0" in _input_bound_advice(load_thresholds()[0])
    xdg.write_text("[advice]\nlow_util_percent = 30\n")
    assert "input_bound:gpu0" not in _input_bound_advice(load_thresholds()[0])
