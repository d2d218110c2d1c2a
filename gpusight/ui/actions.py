"""Every action of the main screen, declared once.

``ACTIONS`` drives the key bindings, the footer, the help screen and the command palette: adding an
action is one entry here plus its ``action_*`` method on the app.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class Action:
    """One thing the user can do on the main screen, with everything each place that offers it shows."""

    action: str
    """Textual action string run by the keys and the palette, e.g. ``"pause"`` or ``"sort('memory')"``."""
    keys: str
    """Textual key names, comma-separated; the first one is the footer's."""
    key_display: str
    """The first key as the footer writes it."""
    label: str
    """Short footer label."""
    title: str
    """Command palette title, unique among the palette's commands."""
    help: str
    """What it does, lower case, for the help screen and the palette; ``{export_dir}`` is filled in."""
    help_keys: str = ""
    """The keys as the help screen writes them; empty: ``key_display``."""
    footer: bool = True
    """Shown in the footer."""
    footer_rank: int = 5
    """Which footer keys stay when the footer is too narrow for all: the lowest ranks (0: always) stay longest."""
    readonly_disabled: bool = False
    """Disabled with ``--readonly``: left out of the footer and the palette, marked on the help screen."""
    priority: bool = False
    """Its keys act on every screen and dialog, before the focused widget sees them."""
    palette: bool = True
    """Offered in the command palette (False for a key-only variant of another action)."""
    replay: bool = False
    """Only while replaying a recording: inactive, and left out of the help screen and the palette, otherwise."""

    @property
    def name(self) -> str:
        """The action's name without parameters, as ``App.check_action`` receives it."""
        return self.action.split("(", 1)[0]

    @property
    def keys_text(self) -> str:
        """The keys as the help screen writes them."""
        return self.help_keys or self.key_display

    def describe(self, export_dir: str) -> str:
        """The help text with the export directory filled in."""
        return self.help.format(export_dir=export_dir)

    def binding(self) -> Binding:
        """The Textual binding of this action."""
        return Binding(self.keys, self.action, self.label, show=self.footer, key_display=self.key_display,
                       priority=self.priority)


def _sort(key: str, sort_key: str, what: str) -> Action:
    """The action sorting the process table by ``sort_key`` (described as ``what``) on ``key``."""
    return Action(action=f"sort('{sort_key}')", keys=key, key_display=key, label=f"Sort {what}", title=f"Sort by {what}",
                  help=f"sort processes by {what} (again to reverse)", footer=False)


def _replay(action: str, keys: str, key_display: str, title: str, help: str, *, palette: bool = True) -> Action:
    """A replay-only action, out of the footer (the position bar shows where playback stands)."""
    return Action(action=action, keys=keys, key_display=key_display, label=title, title=f"Replay: {title.lower()}",
                  help=help, help_keys=f"{key_display} (replay)", footer=False, replay=True, palette=palette)


ACTIONS: tuple[Action, ...] = (
    Action(action="quit", keys="q", key_display="q", label="Quit", title="Quit", help="quit", footer_rank=0),
    Action(action="interrupt", keys="ctrl+c", key_display="Ctrl+C", label="Quit", title="Quit or copy",
           help="quit from any screen or dialog (copies instead while text is selected)",
           footer=False, priority=True, palette=False),
    Action(action="pause", keys="p", key_display="p", label="Pause", title="Pause / resume",
           help="pause / resume polling (PAUSED in the header); in a replay, pause / resume playback", footer_rank=1),
    Action(action="slower", keys="plus,equals_sign", key_display="+", label="Slower", title="Slower updates",
           help="double the polling interval (shown in the header)", footer_rank=7),
    Action(action="faster", keys="minus", key_display="-", label="Faster", title="Faster updates",
           help="halve the polling interval (at least 0.1 s; shown in the header)", footer_rank=7),
    Action(action="export", keys="s", key_display="s", label="Export", title="Export snapshot",
           help="export a snapshot (JSON, Markdown, SVG, HTML report) into {export_dir}/", footer_rank=2),
    Action(action="filter", keys="slash", key_display="/", label="Filter", title="Filter processes",
           help="filter processes by pid, user, name, command line, job (job 3) or container (docker, pod, namespace)", footer_rank=2),
    Action(action="clear_filter", keys="escape", key_display="Esc", label="Clear filter", title="Clear process filter",
           help="clear and close the process filter; also closes screens and dialogs", footer=False),
    Action(action="toggle_workers", keys="t", key_display="t", label="Workers", title="Toggle workers",
           help="show / hide DataLoader worker rows", footer_rank=4),
    Action(action="gpu_detail", keys="enter", key_display="Enter", label="GPU details", title="GPU details",
           help="GPU detail screen of the focused GPU: every field and larger charts",
           help_keys="Enter (GPU panel)", footer=False),
    Action(action="process_detail", keys="d", key_display="d", label="Process", title="Process details",
           help="detail screen of the selected process: its command line, speed, MFU and step-time breakdown over time",
           help_keys="Enter (process table), d", footer=False),
    Action(action="kill", keys="k", key_display="k", label="Signal", title="Send signal",
           help="send a signal to the selected process (asks first)", readonly_disabled=True, footer_rank=4),
    Action(action="zoom", keys="z", key_display="z", label="Zoom", title="Zoom charts",
           help="chart a longer time per column: 1 s, 10 s, 1 min (by default), then back (named above the GPUs)", footer_rank=3),
    Action(action="chart_metric", keys="v", key_display="v", label="Chart", title="Next charted metric",
           help="one-line GPU layout: chart the next metric (util, mem, power, temp, PCIe RX, TX)", footer_rank=3),
    Action(action="toggle_advice", keys="a", key_display="a", label="Advice", title="Toggle advice panel",
           help="show / hide the advice panel", footer_rank=3),
    Action(action="toggle_mine", keys="o", key_display="o", label="Mine", title="My processes only",
           help="only my processes and the advice about them / everyone's (named in the header)", footer=False),
    Action(action="help", keys="question_mark", key_display="?", label="Help", title="Keys",
           help="show every key and what it does", footer_rank=0),
    _sort("m", "memory", "GPU memory"),
    _sort("c", "cpu", "CPU %"),
    _sort("u", "sm", "SM %"),
    _sort("i", "pid", "PID"),
    _sort("g", "gpu", "GPU"),
    _sort("e", "elapsed", "elapsed time"),
    _sort("n", "user", "user"),
    _sort("j", "job", "job"),
    _sort("C", "container", "container"),
    _replay("play_pause", "space", "Space", "Pause", "pause / resume playback (p too)", palette=False),
    _replay("speed(1)", "greater_than_sign", ">", "Faster", "play faster: x1, 2, 5, 10, 20, 50, 100"),
    _replay("speed(-1)", "less_than_sign", "<", "Slower", "play slower, down to the recorded pace (x1)"),
    _replay("skip(10)", "right_square_bracket", "]", "Forward 10 s", "jump 10 s forward"),
    _replay("skip(-10)", "left_square_bracket", "[", "Back 10 s", "jump 10 s back"),
    _replay("skip(60)", "right_curly_bracket", "}", "Forward 1 min", "jump 1 minute forward"),
    _replay("skip(-60)", "left_curly_bracket", "{", "Back 1 min", "jump 1 minute back"),
    _replay("advice_event(1)", "full_stop", ".", "Next advice event",
            "jump to the next time advice was raised or cleared (ticks on the position bar)"),
    _replay("advice_event(-1)", "comma", ",", "Previous advice event",
            "jump to the previous time advice was raised or cleared"),
    _replay("go_to", "G", "G", "Go to time", "go to a time: 03:10, 03:10:30, 2026-11-23 03:10, +1h20m or 90s"),
)
"""The main screen's actions in help-screen order."""

OTHER_KEYS: tuple[tuple[str, str], ...] = (
    ("Tab / Shift+Tab", "move focus between GPU panels, the process table and the advice panel"),
    ("Up / Down / PgUp / PgDn", "move in the process table or scroll the focused panel"),
    ("Ctrl+P", "command palette: every action by name"),
    ("double click a GPU", "open its detail screen"),
)
"""Keys and gestures the widgets and Textual handle, listed on the help screen after the actions."""


def help_rows(
    *, readonly: bool, export_dir: str, replay: bool = False, hidden: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    """(keys, description) of every action (the replay ones only when ``replay``; none named in ``hidden``), then the other keys."""
    rows = []
    for entry in ACTIONS:
        if (entry.replay and not replay) or entry.name in hidden:
            continue
        description = entry.describe(export_dir)
        if readonly and entry.readonly_disabled:
            description += ": disabled (--readonly)"
        rows.append((entry.keys_text, description))
    return rows + list(OTHER_KEYS)


def palette_actions(*, readonly: bool, replay: bool = False, hidden: frozenset[str] = frozenset()) -> list[Action]:
    """The actions the command palette offers (the replay ones only when ``replay``; none named in ``hidden``)."""
    return [
        entry for entry in ACTIONS
        if entry.palette and not (readonly and entry.readonly_disabled) and (replay or not entry.replay)
        and entry.name not in hidden
    ]


def palette_help(entry: Action, export_dir: str) -> str:
    """The palette's line under ``entry``'s title: what it does and its key."""
    text = entry.describe(export_dir)
    return f"{text[:1].upper()}{text[1:]} ({entry.key_display})"


READONLY_DISABLED = frozenset(entry.name for entry in ACTIONS if entry.readonly_disabled)
"""Names of the actions ``--readonly`` disables."""

REPLAY_ONLY = frozenset(entry.name for entry in ACTIONS if entry.replay)
"""Names of the actions that only act on a replay."""
