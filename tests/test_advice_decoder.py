"""The decoder-bound rule: NVDEC at its limit while the SMs idle and the loop waits for data (table-driven, through a
real History and AdviceEngine)."""

from __future__ import annotations

import pytest

from support.advice_frames import Case, check, gpu, steady, trainer, workers

WAITING = [trainer(cpu=35.0, workers=4, input_wait_percent=60.0), *workers(cpus=(30, 35, 28, 31))]

CASES = [
    Case("decoder at its limit, SMs idle, loop waits", steady([gpu(util=22.0, decoder_percent=97.0)], WAITING),
         "decoder_bound:gpu0", True, "warn", ("video decoder 97 % busy", "GPU util 22 %", "waits 60 % of each step",
                                             "up to 2.5x steps/s"),
         absent=("input_bound:gpu0", "gpu_underused:gpu0"), action=("DALI", "CPU workers", "pre-decoded")),
    Case("SM activity from GPM decides where known",
         steady([gpu(util=90.0, decoder_percent=92.0, sm_active_percent=18.0)], WAITING), "decoder_bound:gpu0", True,
         "warn", ("SMs active 18 % (GPM)",)),
    Case("decoder busy but below the limit", steady([gpu(util=22.0, decoder_percent=70.0)], WAITING),
         "decoder_bound:gpu0", False),
    Case("decoder N/A: silent", steady([gpu(util=22.0, decoder_percent=None)], WAITING), "decoder_bound:gpu0", False),
    Case("SMs busy: the decoder keeps up", steady([gpu(util=96.0, decoder_percent=97.0)], WAITING),
         "decoder_bound:gpu0", False),
    Case("loop does not wait for data", steady([gpu(util=22.0, decoder_percent=97.0)],
                                               [trainer(cpu=35.0, input_wait_percent=3.0), *workers()]),
         "decoder_bound:gpu0", False),
    Case("nothing measured the wait: no guess", steady([gpu(util=22.0, decoder_percent=97.0)], [trainer(cpu=35.0)]),
         "decoder_bound:gpu0", False),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_decoder_rule(case: Case) -> None:
    check(case)
