"""``ClusterSource``: one poll of a Prometheus server becomes one :class:`ClusterFrame`.

Each poll sends a fixed number of queries, whatever the fleet's size (see :data:`QUERIES_PER_POLL`):

1. a range query of ``up`` and ``gpusight_build_info``: targets, since when they are down, which run ``gpusight --serve``;
2. an instant query of ``up`` and the device metrics of every GPU (one ``__name__`` regex, reduced to the labels
   that place each series);
3. range queries of GPU utilization and framebuffer used for every GPU (charts, and the fleet advice's windows);
4. an instant query of gpusight's job, process and advice series;
5. a range query of every process's SM % (stragglers);
6. with a focus host, one range query of its power, temperature and PCIe (its charts).

Range queries cover ``history_seconds`` at a step keeping at most ``MAX_POINTS`` points per series; after the
first poll, all but the focus host's ask only for their newest points (:class:`RangeCache`). A node's name is its
``Hostname`` label, else ``hostname`` (dcgm-exporter's spelling since May 2026), else ``instance``.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import replace

from gpusight import metric_names as m
from gpusight.cluster.answer import NodeCut
from gpusight.cluster.counts import counted
from gpusight.cluster.fleet_advice import (
    DEFAULT_WINDOW_SECONDS,
    FleetThresholds,
    RankLoad,
    free_gpus,
    idle_holding,
    judge_free,
    listed,
    nodes_down,
    stragglers,
    window,
)
from gpusight.cluster.frame import (
    ClusterFrame,
    ClusterGpu,
    ClusterHistory,
    ClusterJob,
    ClusterJobSpeed,
    ClusterMig,
    ClusterNode,
    ClusterProcess,
)
from gpusight.cluster.health import LINK, NONZERO, drain_gpus, judge
from gpusight.cluster.http_config import HttpConfig
from gpusight.cluster.job_speed import SPEED_METRICS, job_speeds, read_speeds
from gpusight.cluster.prom import PrometheusClient, PrometheusError, Series
from gpusight.cluster.range_cache import RangeCache
from gpusight.cluster.settings import (
    DEFAULT_HISTORY_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    MAX_NODES,
    MAX_POINTS,
    MAX_TARGETS,
)
from gpusight.cluster.speed_advice import input_bound_jobs
from gpusight.facts.health import HealthAssessment
from gpusight.metric_ranges import plausible
from gpusight.snapshot.model import Advice, Severity, WorkloadKind

QUERIES_PER_POLL = 7
"""The most queries one poll sends, whatever the number of nodes (six without a focus host)."""

GPUSIGHT_PANELS = ("processes", "jobs", "advice", "host CPU")
"""Panels whose data only ``gpusight --serve`` exports."""

STALE_SNAPSHOT_SECONDS = 10.0
"""A ``gpusight --serve`` snapshot older than this is reported: NVML stopped answering on that node."""

INSTANCE = "instance"
"""Prometheus's target label."""

UP = "up"
"""Prometheus's own series: 1 when a target's last scrape succeeded."""

DEVICE_NOW = (m.GPU_UTIL, m.FB_USED, m.FB_FREE, m.FB_RESERVED, m.POWER_USAGE, m.GPU_TEMP, m.SM_ACTIVE,
              m.TENSOR_ACTIVE, m.PCIE_TX, m.PCIE_RX, m.GPU_LOST, m.SNAPSHOT_AGE, m.HOST_CPU, m.HOST_IOWAIT,
              m.XID_ERRORS)
"""The metrics of the instant device query (whole GPUs: series without ``GPU_I_ID``)."""

MIG_NOW = (m.FB_USED, m.FB_FREE, m.SM_ACTIVE, m.TENSOR_ACTIVE)
"""The metrics of MIG instances the instant device query asks for (series with ``GPU_I_ID``)."""

GPUSIGHT_NOW = (m.BUILD_INFO, m.JOB_INFO, m.JOB_WORLD_SIZE, m.JOB_MEMORY, m.PROCESS_INFO, m.PROCESS_MEMORY, m.PROCESS_SM,
              m.PROCESS_CPU, m.WORKERS, m.WORKERS_CPU, m.INPUT_WAIT, m.ADVICE, *SPEED_METRICS)
"""The metrics of the instant gpusight query (``gpusight_build_info`` tells at once which nodes run gpusight)."""

FOCUS_CHARTS = (m.POWER_USAGE, m.GPU_TEMP, m.PCIE_TX, m.PCIE_RX)
"""Chart metrics fetched for the focus host only."""

CORE_METRICS = (m.GPU_UTIL, m.FB_USED, m.POWER_USAGE, m.GPU_TEMP)
"""Device metrics whose absence on a node is reported (the others are optional in dcgm-exporter's defaults)."""

MIB = 1 << 20
"""Bytes in a MiB."""

def names_regex(metrics: Iterable[m.MetricName], *others: str, matchers: str = "") -> str:
    """A selector matching every one of ``metrics`` (and the ``others`` names) by name, and ``matchers``."""
    return '{__name__=~"' + "|".join([*others, *(metric.name for metric in metrics)]) + '"' + matchers + "}"


WHOLE_GPU = f',{m.LABEL_GPU_I_ID}=""'
"""Matcher of the series of whole GPUs: a MIG instance's carry ``GPU_I_ID`` (dcgm-exporter and gpusight alike)."""
MIG_INSTANCE = f',{m.LABEL_GPU_I_ID}!=""'
"""Matcher of the series of MIG instances."""


PLACE = f"{m.LABEL_HOSTNAME}, {m.LABEL_HOSTNAME_NEW}, {INSTANCE}, {m.LABEL_GPU}"
"""The labels that place a GPU's series: its node and its index."""



def _below(current: m.MetricName, most: m.MetricName) -> str:
    """Whole GPUs whose ``current`` is below ``most`` (PromQL), by the labels that place them."""
    return f"max by ({PLACE}) ({current.name}{{{WHOLE_GPU[1:]}}}) < max by ({PLACE}) ({most.name}{{{WHOLE_GPU[1:]}}})"


def _part(expr: str, name: str) -> str:
    """``expr`` with a ``part`` label of ``name``: ``or`` matches series by their labels without the metric name, so
    each part of one query needs labels of its own, or a GPU's series in one part would hide its others."""
    return f'label_replace({expr}, "{PART}", "{name}", "", "")'


PART = "part"
"""The label telling the parts of the device query apart (ignored when reading the answer)."""

NONZERO_NOW = _part(f"max by (__name__, {PLACE}) ({names_regex(NONZERO, matchers=WHOLE_GPU)} != 0)", "nonzero")
"""The health and video series of whole GPUs that are not 0."""

DEGRADED_LINK = _part(f"max by (__name__, {PLACE}) ({names_regex(LINK, matchers=WHOLE_GPU)}) and on ({PLACE}) "
                      f"({_below(m.PCIE_LINK_WIDTH, m.PCIE_MAX_LINK_WIDTH)} or "
                      f"{_below(m.PCIE_LINK_GEN, m.PCIE_MAX_LINK_GEN)})", "link")
"""The four PCIe link series of the GPUs whose link runs below its maximum generation or width."""

DEVICE_QUERY = (f"max by (__name__, {PLACE}, {m.LABEL_UUID}, {m.LABEL_MODEL}) "
                f"({m.GPU_UTIL.name}{{{WHOLE_GPU[1:]}}}) or "
                f"max by (__name__, {PLACE}) ({names_regex(DEVICE_NOW[1:], UP, matchers=WHOLE_GPU)}) or "
                f"{NONZERO_NOW} or {DEGRADED_LINK} or "
                f"max by (__name__, {PLACE}, {', '.join(m.MIG_LABELS)}) ({names_regex(MIG_NOW, matchers=MIG_INSTANCE)})")
"""The instant device query: one series per GPU and metric with only the labels that place it (a quarter of the
bytes of the raw series; Kubernetes' per-pod copies of a GPU's series collapse into one); the utilization
series also carry the GPU's UUID and model. Health and video series come only where they tell something
(``NONZERO``, ``DEGRADED_LINK``); MIG instances' series keep ``GPU_I_ID`` and ``GPU_I_PROFILE`` and never mix with
their parent's. MIG, health and video engines cost no query of their own."""


def placed(metric: m.MetricName) -> str:
    """``metric`` for every whole GPU, with only the labels that place each series (for range queries)."""
    return f"max by ({PLACE}) ({metric.name}{{{WHOLE_GPU[1:]}}})"


def promql_string(value: str) -> str:
    """``value`` as a PromQL string literal: characters beyond U+FFFF as UTF-8, never as the JSON surrogate pairs
    that PromQL's Go unquoting refuses (a lone surrogate, which UTF-8 cannot carry, stays escaped and fails there)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value)
    return json.dumps(value, ensure_ascii=False)


def host_label(labels: dict[str, str]) -> tuple[str, str]:
    """(label name, node name) of a series: ``Hostname``, else ``hostname``, else ``instance``."""
    for name in (m.LABEL_HOSTNAME, m.LABEL_HOSTNAME_NEW, INSTANCE):
        if labels.get(name):
            return name, labels[name]
    return INSTANCE, "?"


NODE, TARGET = "node", "target"
"""The groups of :class:`NodeCut`: a node's series (by its name) and ``up`` series (by their target)."""


def place(labels: dict[str, str]) -> tuple[str, str]:
    """(group, key) of a series for :class:`NodeCut`: ``up`` by its target, anything else by its node."""
    if labels.get("__name__") == UP:
        return TARGET, labels.get(INSTANCE, "")
    return NODE, host_label(labels)[1]


def cut_note(cuts: Iterable[NodeCut]) -> str | None:
    """The line saying what the poll's answers cut (None when nothing): the nodes kept of those seen, and the
    metric Prometheus answered most series of."""
    cuts = list(cuts)
    worst = max(cuts, key=lambda cut: cut.cut(NODE)[1], default=None)
    targets = max((cut.cut(TARGET) for cut in cuts), key=lambda kept_seen: kept_seen[1], default=(0, 0))
    if worst is not None and worst.cut(NODE)[0] < worst.cut(NODE)[1]:
        kept, seen = worst.cut(NODE)
        name, count = max(worst.series_by_name.items(), key=lambda item: (item[1], item[0]))
        of = f" ({count:,} of {name})" if name else ""
        return (f"showing {kept:,} of {seen:,} nodes (the first by name; at most {MAX_NODES:,}): Prometheus answered "
                f"{worst.series_by_name.total():,} series to one query{of}; point --cluster at a Prometheus that "
                "scrapes fewer nodes")
    if targets[0] < targets[1]:
        return (f"kept {targets[0]:,} of {targets[1]:,} scrape targets (the first by name; at most {MAX_TARGETS:,}): "
                "the others' up/down state is unknown")
    return None


def number(text: str) -> int | None:
    """``text`` as a whole number when it is one written in ASCII digits (labels are untrusted), else None."""
    return int(text) if text.isascii() and text.isdigit() else None


def gpu_index(labels: dict[str, str]) -> int | None:
    """The ``gpu`` label as a number; None when absent or not a number."""
    return number(labels.get(m.LABEL_GPU, ""))


def hhmmss(t: float) -> str:
    """``t`` as local HH:MM:SS."""
    return time.strftime("%H:%M:%S", time.localtime(t))


class _Abort(Exception):
    """The server cannot answer this poll (unreachable, slow, not Prometheus): stop sending queries."""


class ClusterSource:
    """Polls one Prometheus server; keeps what it saw, so a node that stops reporting keeps its last values.

    ``poll`` blocks (at most about one request timeout when the server is gone) and never raises.
    Call it from one thread at a time.
    """

    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT_SECONDS,
                 history_seconds: float = DEFAULT_HISTORY_SECONDS, thresholds: FleetThresholds | None = None,
                 clock: Callable[[], float] = time.time, server_stats: bool = False,
                 http_config: HttpConfig | None = None) -> None:
        self.client = PrometheusClient(url, timeout, server_stats=server_stats, http_config=http_config)
        """The HTTP API client (its ``stats`` hold the last poll's cost)."""
        self.history_seconds = history_seconds
        """How far back range queries reach."""
        self.step = float(max(1, math.ceil(history_seconds / MAX_POINTS)))
        """Seconds between the points of a range query."""
        self.thresholds = thresholds or FleetThresholds(
            window_seconds=min(DEFAULT_WINDOW_SECONDS, history_seconds / 2))
        """The fleet advice's thresholds; by default the window is 60 s, or half the history when that is shorter."""
        self._clock = clock
        self._targets_cache = RangeCache(names_regex((m.BUILD_INFO,), UP), self.step)
        self._util_cache = RangeCache(placed(m.GPU_UTIL), self.step)
        self._memory_cache = RangeCache(placed(m.FB_USED), self.step)
        self._sm_cache = RangeCache(m.PROCESS_SM.name, self.step)
        self._last_gpus: dict[str, tuple[ClusterGpu, ...]] = {}
        self._host_label: dict[str, tuple[str, str]] = {}
        self._instances: dict[str, set[str]] = defaultdict(set)
        self._gpusight_hosts: set[str] = set()
        self._last_seen: dict[str, float] = {}
        self._identity: dict[tuple[str, int | None], dict[str, str]] = {}
        self.last_stats = self.client.stats
        """The request stats of the last poll (requests, bytes, seconds)."""
        self.reachable = True
        """False when the last poll could not query the server at all (bad URL, unreachable, slow, not Prometheus)."""
        self.cut_note: str | None = None
        """The last poll's line saying which nodes it left out (:data:`MAX_NODES`), None when it showed all."""
        self._cuts: list[NodeCut] = []

    @property
    def url(self) -> str:
        """The server's base URL, without credentials."""
        return self.client.url

    def poll(self, focus_host: str | None = None) -> ClusterFrame:
        """Query the server once and build the frame; problems go into ``frame.problems``, nothing raises."""
        now = self._clock()
        self.client.reset_stats()
        problems: list[str] = []
        self.reachable = True
        self._cuts = []
        self.cut_note = None
        try:
            frame = self._poll(now, focus_host, problems)
            self.cut_note = cut_note(self._cuts)
            if self.cut_note is not None:
                frame = replace(frame, problems=(self.cut_note, *frame.problems))
        except _Abort:
            self.reachable = False
            frame = ClusterFrame(timestamp=now, url=self.url, nodes=self._unreachable_nodes(),
                                 problems=tuple(problems))
        self.last_stats = self.client.stats
        return replace(frame, query_seconds=self.client.stats.seconds)

    def _cut(self) -> NodeCut:
        """A cut for one query of this poll: the first :data:`MAX_NODES` nodes and :data:`MAX_TARGETS` targets."""
        cut = NodeCut(place, {NODE: MAX_NODES, TARGET: MAX_TARGETS})
        self._cuts.append(cut)
        return cut

    def _ask(self, problems: list[str], query: Callable[[], list[Series]]) -> list[Series]:
        """Run ``query``; a query error becomes a problem line, an unusable server aborts the poll."""
        try:
            return query()
        except PrometheusError as exc:
            problems.append(str(exc))
            if exc.fatal:
                raise _Abort from None
            return []

    def _range(self, problems: list[str], expr: str, start: float, end: float) -> list[Series]:
        """A range query at the poll's step, through :meth:`_ask`."""
        return self._ask(problems, lambda: self.client.query_range(expr, start, end, self.step, self._cut()))

    def _cached(self, problems: list[str], cache: RangeCache, start: float, end: float) -> list[Series]:
        """A range query through its cache (only the newest points are fetched), through :meth:`_ask`."""
        return self._ask(problems, lambda: cache.fetch(self.client, start, end, self._cut()))

    def _poll(self, now: float, focus_host: str | None, problems: list[str]) -> ClusterFrame:
        """Send the poll's queries and build the frame; raises :class:`_Abort` when the server is unusable."""
        try:
            self.client.check_url()
        except PrometheusError as exc:
            problems.append(str(exc))
            raise _Abort from None
        end = now
        start = math.floor((now - self.history_seconds) / self.step) * self.step
        targets = self._cached(problems, self._targets_cache, start, end)
        device = self._ask(problems, lambda: self.client.query(DEVICE_QUERY, at=now, cut=self._cut()))
        util_series = self._cached(problems, self._util_cache, start, end)
        memory_series = self._cached(problems, self._memory_cache, start, end)
        util, memory = self._history(m.GPU_UTIL.name, util_series, start), self._history(m.FB_USED.name, memory_series, start)
        gpusight = self._ask(problems, lambda: self.client.query(names_regex(GPUSIGHT_NOW), at=now, cut=self._cut()))
        sm = self._cached(problems, self._sm_cache, start, end)
        self._learn_hosts(targets, device, util_series, memory_series, gpusight)
        self._identity.update({(host_label(s.labels)[1], gpu_index(s.labels)): s.labels for s in device
                               if s.labels.get("__name__") == m.GPU_UTIL.name})
        nodes = self._nodes(now, targets, device, self._identity, util, memory, problems)
        histories = [util, memory]
        if focus_host is not None:
            present = {s.labels.get("__name__", "") for s in device if host_label(s.labels)[1] == focus_host}
            histories += self._focus(focus_host, present, start, end, problems)
        jobs, processes, node_advice = self._gpusight(gpusight)
        up_hosts = {node.host for node in nodes if node.up}
        nodes = judge_free(nodes, util, memory, processes, self.thresholds)
        speeds = job_speeds(jobs)
        fleet = self._fleet_advice(nodes, util, memory, jobs, processes, sm, up_hosts, speeds)
        return ClusterFrame(
            timestamp=now, url=self.url, nodes=nodes, jobs=jobs, job_speeds=speeds, processes=processes,
            node_advice=node_advice,
            fleet_advice=fleet, history=tuple(histories), problems=tuple(problems),
            missing_panels=self._missing_panels(nodes),
        )

    # -- nodes ----------------------------------------------------------------------------------------------------

    def _learn_hosts(self, *answers: list[Series]) -> None:
        """Remember each node's name label and its targets, from every series seen."""
        for answer in answers:
            for series in answer:
                if series.labels.get("__name__") == UP:
                    continue
                label, host = host_label(series.labels)
                self._host_label.setdefault(host, (label, host))
                if series.labels.get(INSTANCE):
                    self._instances[host].add(series.labels[INSTANCE])
                if series.labels.get("__name__") == m.BUILD_INFO.name:
                    self._gpusight_hosts.add(host)
                self._last_seen[host] = max(self._last_seen.get(host, 0.0), series.points[-1][0])

    def _learn_hosts_history(self, *histories: ClusterHistory) -> None:
        """Remember when each node's charts last had a sample."""
        for history in histories:
            for (host, _gpu), values in history.series.items():
                last = max((i for i, v in enumerate(values) if v is not None), default=None)
                if last is not None:
                    seen = history.start + last * history.step
                    self._last_seen[host] = max(self._last_seen.get(host, 0.0), seen)

    def _nodes(self, now: float, targets: list[Series], device: list[Series],
               identity: dict[tuple[str, int | None], dict[str, str]], util: ClusterHistory, memory: ClusterHistory,
               problems: list[str]) -> tuple[ClusterNode, ...]:
        """Every node seen, up or not; ``identity`` gives each GPU's full labels (UUID, model)."""
        ups = {s.labels.get(INSTANCE, ""): s for s in targets if s.labels.get("__name__") == UP}
        up_now = {s.labels.get(INSTANCE, ""): s.value for s in device if s.labels.get("__name__") == UP}
        fresh: dict[str, dict[int, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
        host_values: dict[str, dict[str, float]] = defaultdict(dict)
        migs: dict[tuple[str, int], dict[tuple[int, str], dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
        for series in device:
            host = host_label(series.labels)[1]
            name = series.labels.get("__name__", "")
            index = gpu_index(series.labels)
            instance = number(series.labels.get(m.LABEL_GPU_I_ID, ""))
            if name == UP:
                continue
            if instance is not None and index is not None:
                migs[(host, index)][(instance, series.labels.get(m.LABEL_GPU_I_PROFILE, ""))][name] = series.value
            elif name in (m.HOST_CPU.name, m.HOST_IOWAIT.name, m.SNAPSHOT_AGE.name):
                host_values[host][name] = series.value
            elif index is not None:
                fresh[host][index][name] = series.value
        self._learn_hosts_history(util, memory)
        for gone in [h for h in self._host_label if h not in fresh and self._last_seen.get(h, now) < now - self.history_seconds]:
            self._forget(gone)
        hosts = sorted(set(self._host_label) | set(fresh))
        nodes = []
        missing: dict[str, list[str]] = defaultdict(list)
        for host in hosts:
            instances = tuple(sorted(self._instances.get(host, ())))
            if host in fresh:
                gpus = tuple(self._gpu(host, index, fresh[host][index], identity.get((host, index), {}), now,
                                       _instances(migs.get((host, index), {})))
                             for index in sorted(fresh[host]))
                self._last_gpus[host] = gpus
                for metric in CORE_METRICS:
                    if not any(metric.name in values for values in fresh[host].values()):
                        missing[metric.name].append(host)
            else:
                gpus = self._last_gpus.get(host) or self._gpus_from_history(host, util, memory)
            up, note = self._liveness(host, instances, up_now, ups, host in fresh, now)
            extra = host_values.get(host, {})
            age = plausible(m.SNAPSHOT_AGE.name, extra.get(m.SNAPSHOT_AGE.name))
            if up and age is not None and age > STALE_SNAPSHOT_SECONDS:
                note = f"data {age:.0f} s old: gpusight --serve gets no answer from NVML there"
                problems.append(f"{host}: {note}")
            nodes.append(ClusterNode(
                host=host, instances=instances, up=up, exporter="gpusight" if host in self._gpusight_hosts else "dcgm",
                gpus=gpus, last_seen=self._last_seen.get(host), note=note,
                cpu_percent=plausible(m.HOST_CPU.name, extra.get(m.HOST_CPU.name)),
                iowait_percent=plausible(m.HOST_IOWAIT.name, extra.get(m.HOST_IOWAIT.name)),
            ))
        for name, where in sorted(missing.items()):
            problems.append(f"no {name} from {listed(where)}: shown as N/A")
        mapped = {i for node in nodes for i in node.instances}
        orphans = sorted(i for i, value in up_now.items() if i not in mapped and value == 0)
        if orphans:
            problems.append(f"targets down, no GPU data seen from them: {listed(orphans)}")
        if not nodes:
            problems.append("no GPU metrics found: is dcgm-exporter or gpusight --serve scraped by this Prometheus?"
                            if targets else "this Prometheus scrapes no targets")
        return tuple(nodes)

    def _forget(self, host: str) -> None:
        """Drop a node silent for longer than the history (its target, if still scraped, shows as a target down)."""
        for table in (self._host_label, self._last_gpus, self._instances, self._last_seen):
            table.pop(host, None)
        self._gpusight_hosts.discard(host)
        for key in [k for k in self._identity if k[0] == host]:
            del self._identity[key]

    def _liveness(self, host: str, instances: tuple[str, ...], up_now: dict[str, float], ups: dict[str, Series],
                  fresh: bool, now: float) -> tuple[bool, str | None]:
        """(up, note): down when every target of the node is down now (``up`` is 0, or gone), else when its
        samples went stale; ``ups`` (the range of ``up``) tells since when."""
        known_targets = [i for i in instances if i in up_now or i in ups]
        if known_targets and all(up_now.get(i, 0) == 0 for i in known_targets):
            moments = [t for t in (_down_since(ups[i]) for i in known_targets if i in ups) if t is not None]
            if not moments:
                return False, f"down (no scrape succeeded in the last {self.history_seconds:.0f} s)"
            return False, f"down since {hhmmss(min(moments))}"
        if not fresh:
            seen = self._last_seen.get(host)
            if seen is None:
                return False, "no samples"
            return False, f"no samples for {max(0.0, now - seen):.0f} s"
        return True, None

    def _unreachable_nodes(self) -> tuple[ClusterNode, ...]:
        """The nodes as last seen, for a frame whose poll could not reach the server."""
        return tuple(
            ClusterNode(host=host, instances=tuple(sorted(self._instances.get(host, ()))), up=False,
                        exporter="gpusight" if host in self._gpusight_hosts else "dcgm", gpus=gpus,
                        last_seen=self._last_seen.get(host), note="unknown: Prometheus did not answer")
            for host, gpus in sorted(self._last_gpus.items())
        )

    @staticmethod
    def _gpu(host: str, index: int, values: dict[str, float], labels: dict[str, str], now: float,
             mig: tuple[ClusterMig, ...]) -> ClusterGpu:
        """One GPU from its instant values (metric name -> value) and its full labels, its health judged at ``now``."""
        def value(metric: m.MetricName) -> float | None:
            return plausible(metric.name, values.get(metric.name))

        def percent(metric: m.MetricName) -> float | None:
            ratio = value(metric)
            return None if ratio is None else ratio * 100

        used, free, reserved = value(m.FB_USED), value(m.FB_FREE), value(m.FB_RESERVED)
        total = None if used is None or free is None else int((used + free + (reserved or 0)) * MIB)
        return ClusterGpu(
            host=host, index=index, uuid=labels.get(m.LABEL_UUID) or None, model=labels.get(m.LABEL_MODEL) or None,
            utilization_percent=value(m.GPU_UTIL), memory_used_bytes=None if used is None else int(used * MIB),
            memory_total_bytes=total, power_watts=value(m.POWER_USAGE), temperature_celsius=value(m.GPU_TEMP),
            sm_active_percent=percent(m.SM_ACTIVE), tensor_active_percent=percent(m.TENSOR_ACTIVE),
            pcie_tx_bytes_per_s=value(m.PCIE_TX), pcie_rx_bytes_per_s=value(m.PCIE_RX),
            encoder_percent=value(m.ENC_UTIL), decoder_percent=value(m.DEC_UTIL),
            health=_health(index, value(m.GPU_UTIL), value, now),
            mig=mig, lost=value(m.GPU_LOST) == 1,
        )

    @staticmethod
    def _gpus_from_history(host: str, util: ClusterHistory, memory: ClusterHistory) -> tuple[ClusterGpu, ...]:
        """A silent node's GPUs with the last utilization and memory the charts hold (first poll after it died)."""
        def last(history: ClusterHistory, index: int) -> float | None:
            values = history.series.get((host, index), ())
            return next((v for v in reversed(values) if v is not None), None)

        indexes = sorted({g for h, g in (*util.series, *memory.series) if h == host})
        gpus = []
        for index in indexes:
            used = last(memory, index)
            gpus.append(ClusterGpu(host=host, index=index, utilization_percent=last(util, index),
                                   memory_used_bytes=None if used is None else int(used * MIB)))
        return tuple(gpus)

    # -- charts ---------------------------------------------------------------------------------------------------

    def _history(self, metric: str, answer: list[Series], start: float) -> ClusterHistory:
        """A range query's series on the poll's time grid, keyed by (host, gpu)."""
        count = int(round(self.history_seconds / self.step)) + 1
        series: dict[tuple[str, int], tuple[float | None, ...]] = {}
        for item in answer:
            index = gpu_index(item.labels)
            if index is None:
                continue
            values: list[float | None] = [None] * count
            for t, v in item.points:
                slot = int(round((t - start) / self.step))
                if 0 <= slot < count:
                    values[slot] = plausible(metric, v)
            series[(host_label(item.labels)[1], index)] = tuple(values)
        return ClusterHistory(metric=metric, start=start, step=self.step, series=series)

    def _focus(self, host: str, present: set[str], start: float, end: float,
               problems: list[str]) -> list[ClusterHistory]:
        """The focus host's power, temperature and PCIe charts (one range query); ``present`` names the metrics
        the host serves now, so a chart empty only because its first point is yet to come is no problem."""
        label, value = self._host_label.get(host, (m.LABEL_HOSTNAME, host))
        selector = names_regex(FOCUS_CHARTS)[:-1] + f",{label}={promql_string(value)}}}"
        answer = self._range(problems, selector, start, end)
        histories = []
        for metric in FOCUS_CHARTS:
            history = self._history(metric.name, [s for s in answer if s.labels.get("__name__") == metric.name], start)
            histories.append(history)
        absent = [metric.name for metric, history in zip(FOCUS_CHARTS, histories, strict=True)
                  if not history.series and metric.name not in present]
        if absent and host in self._host_label:
            problems.append(f"{host}: no {', '.join(absent)}: those charts stay empty")
        return histories

    # -- gpusight's own series --------------------------------------------------------------------------------------

    def _gpusight(self, answer: list[Series]) -> tuple[tuple[ClusterJob, ...], tuple[ClusterProcess, ...],
                                                     tuple[tuple[str, Advice], ...]]:
        """Jobs, processes and each node's advice from the instant gpusight query."""
        by_name: dict[str, list[Series]] = defaultdict(list)
        for series in answer:
            by_name[series.labels.get("__name__", "")].append(series)

        def keyed(metric: m.MetricName, *labels: str) -> dict[tuple[str, ...], float]:
            values = ((s, plausible(metric.name, s.value)) for s in by_name[metric.name])
            return {(host_label(s.labels)[1], *(s.labels.get(label, "") for label in labels)): value
                    for s, value in values if value is not None}

        world = keyed(m.JOB_WORLD_SIZE, m.LABEL_JOB)
        job_memory = keyed(m.JOB_MEMORY, m.LABEL_JOB)
        speeds = read_speeds(by_name, lambda labels: host_label(labels)[1])
        jobs = []
        for series in by_name[m.JOB_INFO.name]:
            host, labels = host_label(series.labels)[1], series.labels
            text = labels.get(m.LABEL_JOB, "")
            job = number(text)
            if job is None:
                continue
            kind = labels.get(m.LABEL_KIND, "")
            size, held = world.get((host, text)), job_memory.get((host, text))
            jobs.append(ClusterJob(
                host=host, job=job,
                kind=WorkloadKind(kind) if kind in WorkloadKind._value2member_map_ else WorkloadKind.UNKNOWN,
                cluster_job=labels.get(m.LABEL_CLUSTER_JOB) or None, world_size=None if size is None else int(size),
                memory_bytes=None if held is None else int(held), **speeds.get((host, text), {}),
            ))
        per_process = (m.LABEL_JOB, m.LABEL_RANK, m.LABEL_GPU)
        figures = {metric.name: keyed(metric, *per_process) for metric in
                   (m.PROCESS_MEMORY, m.PROCESS_SM, m.PROCESS_CPU, m.WORKERS, m.WORKERS_CPU, m.INPUT_WAIT)}
        processes = []
        for series in by_name[m.PROCESS_INFO.name]:
            labels = series.labels
            host = host_label(labels)[1]
            key = (host, *(labels.get(label, "") for label in per_process))
            job = number(key[1])
            if job is None:
                continue
            memory, workers = figures[m.PROCESS_MEMORY.name].get(key), figures[m.WORKERS.name].get(key)
            processes.append(ClusterProcess(
                host=host, job=job, rank=key[2], gpu=gpu_index(labels),
                gpu_instance_id=number(labels.get(m.LABEL_GPU_I_ID, "")),
                name=labels.get(m.LABEL_PROCESS) or None, user=labels.get(m.LABEL_USER) or None,
                container=labels.get(m.LABEL_CONTAINER) or None, pod=labels.get(m.LABEL_POD) or None,
                namespace=labels.get(m.LABEL_NAMESPACE) or None, slurm_job_id=labels.get(m.LABEL_SLURM_JOB) or None,
                memory_bytes=None if memory is None else int(memory), sm_percent=figures[m.PROCESS_SM.name].get(key),
                cpu_percent=figures[m.PROCESS_CPU.name].get(key),
                workers=None if workers is None else int(workers),
                workers_cpu_percent=figures[m.WORKERS_CPU.name].get(key),
                input_wait_percent=figures[m.INPUT_WAIT.name].get(key),
            ))
        advice = []
        for series in by_name[m.ADVICE.name]:
            labels = series.labels
            severity = labels.get(m.LABEL_SEVERITY, "")
            rule = labels.get(m.LABEL_RULE, "")
            advice.append((host_label(labels)[1], Advice(
                id=labels.get(m.LABEL_ADVICE_ID, rule), scope=labels.get(m.LABEL_SCOPE, ""),
                severity=Severity(severity) if severity in Severity._value2member_map_ else Severity.INFO,
                title=labels.get(m.LABEL_SUMMARY) or rule.replace("_", " ") or labels.get(m.LABEL_ADVICE_ID, ""),
                evidence="", action="",
            )))
        order = {severity: rank for rank, severity in enumerate(Severity)}
        return (tuple(sorted(jobs, key=lambda j: (j.host, j.job))),
                tuple(sorted(processes, key=lambda p: (p.host, p.job, p.rank))),
                tuple(sorted(advice, key=lambda a: (order[a[1].severity], a[0], a[1].id))))

    def _missing_panels(self, nodes: tuple[ClusterNode, ...]) -> tuple[str, ...]:
        """One line per panel when no node runs ``gpusight --serve``; one line naming the nodes when some do not."""
        if not nodes:
            return ()
        without = [node.host for node in nodes if node.exporter != "gpusight"]
        if len(without) == len(nodes):
            return tuple(f"{panel}: needs gpusight --serve on the nodes (dcgm-exporter alone reports GPU-level data)"
                         for panel in GPUSIGHT_PANELS)
        if without:
            return (f"{', '.join(GPUSIGHT_PANELS)}: none from {counted(len(without), 'node')} "
                    f"without gpusight --serve ({listed(without)})",)
        return ()

    # -- fleet advice ---------------------------------------------------------------------------------------------

    def _fleet_advice(self, nodes: tuple[ClusterNode, ...], util: ClusterHistory, memory: ClusterHistory,
                      jobs: tuple[ClusterJob, ...], processes: tuple[ClusterProcess, ...], sm: list[Series],
                      up_hosts: set[str], speeds: tuple[ClusterJobSpeed, ...]) -> tuple[Advice, ...]:
        th = self.thresholds
        ranks = list(self._rank_loads(jobs, processes, sm, util, up_hosts))
        drains = drain_gpus([(gpu.host, gpu.index, gpu.health) for node in nodes if node.up for gpu in node.gpus])
        advice = (drains + nodes_down(nodes) + stragglers(ranks, th) + input_bound_jobs(jobs, speeds)
                  + idle_holding(util, memory, up_hosts, processes, th) + free_gpus(nodes, th))
        order = {severity: rank for rank, severity in enumerate(Severity)}
        return tuple(sorted(advice, key=lambda a: order[a.severity]))

    def _rank_loads(self, jobs: tuple[ClusterJob, ...], processes: tuple[ClusterProcess, ...], sm: list[Series],
                    util: ClusterHistory, up_hosts: set[str]) -> Iterable[RankLoad]:
        """Each rank of each job with a cluster key, with its SM % (else its GPU's utilization) over the window."""
        keys = {(job.host, job.job): job.cluster_job for job in jobs if job.cluster_job}
        members = [p for p in processes if (p.host, p.job) in keys and p.host in up_hosts]
        cutoff = max((s.points[-1][0] for s in sm), default=0.0) - self.thresholds.window_seconds
        needed = self.thresholds.min_coverage * self.thresholds.window_seconds / self.step
        sm_means: dict[tuple[str, str, str, str], float] = {}
        for series in sm:
            recent = [v for t, v in series.points if t > cutoff and plausible(m.PROCESS_SM.name, v) is not None]
            if recent and len(recent) >= needed:
                labels = series.labels
                sm_means[(host_label(labels)[1], labels.get(m.LABEL_JOB, ""), labels.get(m.LABEL_RANK, ""),
                          labels.get(m.LABEL_GPU, ""))] = sum(recent) / len(recent)
        by_job: dict[str, list[ClusterProcess]] = defaultdict(list)
        for process in members:
            by_job[keys[(process.host, process.job)]].append(process)
        for cluster_job, group in by_job.items():
            sm_keys = [(p.host, str(p.job), p.rank, "" if p.gpu is None else str(p.gpu)) for p in group]
            if all(key in sm_means for key in sm_keys):
                for process, key in zip(group, sm_keys, strict=True):
                    yield RankLoad(cluster_job, process.host, process.gpu, process.rank, sm_means[key], "SM")
                continue
            for process in group:
                if process.gpu is None:
                    continue
                values = window(util, (process.host, process.gpu), self.thresholds)
                if values:
                    yield RankLoad(cluster_job, process.host, process.gpu, process.rank,
                                   sum(values) / len(values), "GPU util")


def _health(index: int, utilization: float | None, value: Callable[[m.MetricName], float | None],
            now: float) -> HealthAssessment | None:
    """The GPU's health judged from its series; None when it serves none."""
    assessment = judge(index, utilization, value, now)
    return None if assessment.score is None else assessment


def _instances(values: dict[tuple[int, str], dict[str, float]]) -> tuple[ClusterMig, ...]:
    """A GPU's MIG instances from their series' values, by ``(GPU_I_ID, GPU_I_PROFILE)``, in instance order."""
    instances = []
    for (instance, profile), figures in sorted(values.items()):
        def value(metric: m.MetricName, figures: dict[str, float] = figures) -> float | None:
            return plausible(metric.name, figures.get(metric.name))

        used, free = value(m.FB_USED), value(m.FB_FREE)
        active, tensor = value(m.SM_ACTIVE), value(m.TENSOR_ACTIVE)
        instances.append(ClusterMig(
            gpu_instance_id=instance, profile=profile or None,
            memory_used_bytes=None if used is None else int(used * MIB),
            memory_total_bytes=None if used is None or free is None else int((used + free) * MIB),
            sm_active_percent=None if active is None else active * 100,
            tensor_active_percent=None if tensor is None else tensor * 100))
    return tuple(instances)


def _down_since(series: Series) -> float | None:
    """When an ``up`` series last turned from 1 to 0 (or stopped); None when it was down for the whole window."""
    last_up = None
    for t, v in series.points:
        if v == 1:
            last_up = t
    if last_up is None:
        return None
    later = [t for t, _ in series.points if t > last_up]
    return later[0] if later else last_up
