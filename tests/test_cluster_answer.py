"""Reading a Prometheus answer a series at a time gives the same series as reading it whole, however the bytes
are split, and the cut keeps the first nodes by name whatever order they come in."""

from __future__ import annotations

import json
import random

import pytest

from gpusight.cluster.answer import AnswerReader, AnswerTooLarge, MalformedAnswer, NodeCut, to_series
from gpusight.cluster.settings import MAX_WHOLE_ANSWER_BYTES

ITEMS = [{"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": f"nöde-{i % 7}", "gpu": str(i),
                     "pod": "名前\u202e[link=http://evil.example/]x[/link]"},
          "values": [[1000 + 3 * k, str(i * k)] for k in range(5)]} for i in range(40)]


def read(body: bytes, sizes: list[int], cut: NodeCut | None = None) -> tuple[dict, NodeCut]:
    reader = AnswerReader(cut or NodeCut())
    at = 0
    for size in sizes:
        reader.feed(body[at:at + size])
        at += size
    reader.feed(body[at:])
    document = reader.finish()
    assert document is not None
    return document, reader.cut


@pytest.mark.parametrize("layout", ["prometheus", "reordered"])
def test_any_split_of_the_bytes_gives_the_series_of_the_whole_answer(layout) -> None:
    data = {"resultType": "matrix", "result": ITEMS, "stats": {"timings": {"evalTotalTime": 0.5}}}
    document = {"status": "success", "data": data} if layout == "prometheus" else {"data": data, "status": "success"}
    body = json.dumps(document, ensure_ascii=False).encode()
    expected = [to_series(item, "matrix") for item in ITEMS]
    rng = random.Random(7)
    for sizes in ([1] * len(body), [rng.randint(1, 97) for _ in range(len(body) // 40)], []):
        answer, cut = read(body, sizes)
        assert cut.series() == expected
        assert answer["data"]["stats"]["timings"]["evalTotalTime"] == 0.5


def test_the_cut_keeps_the_first_nodes_by_name_in_any_order() -> None:
    body = json.dumps({"status": "success", "data": {"resultType": "matrix",
                                                   "result": random.Random(3).sample(ITEMS, len(ITEMS))}}).encode()
    _, cut = read(body, [50] * (len(body) // 50),
                  NodeCut(lambda labels: ("node", labels["Hostname"]), {"node": 3}))
    assert sorted({s.labels["Hostname"] for s in cut.series()}) == ["nöde-0", "nöde-1", "nöde-2"]
    assert len(cut.series()) == sum(1 for item in ITEMS if item["metric"]["Hostname"] < "nöde-3")
    assert cut.cut("node") == (3, 7)
    assert cut.series_by_name.total() == len(ITEMS)


def test_a_cut_off_answer_is_malformed_and_an_unknown_layout_is_refused_past_its_limit() -> None:
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {}, "value": [1, "1"]}] * 3}}).encode()
    with pytest.raises(MalformedAnswer):
        read(body[:-40], [])
    reader = AnswerReader(NodeCut())
    reader.feed(b'{"data": {"result": [' + b" " * 8192)
    with pytest.raises(AnswerTooLarge):
        for _ in range(MAX_WHOLE_ANSWER_BYTES // (1 << 20) + 1):
            reader.feed(b" " * (1 << 20))
