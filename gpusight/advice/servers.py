"""Inference servers by command line, and the settings that size their memory and their batches."""

from __future__ import annotations

from dataclasses import dataclass

from gpusight.snapshot.model import ProcessSample


@dataclass(frozen=True, slots=True)
class Server:
    """An inference server family and its knobs."""

    name: str
    """Name for the advice, e.g. ``"vLLM"``."""
    memory: str
    """How to make it reserve less GPU memory."""
    batching: str
    """How to let it form larger batches."""


SERVERS = (
    (("vllm",), Server(
        "vLLM", "lower --gpu-memory-utilization (default 0.9 of the GPU, most of it KV cache)",
        "vLLM --max-num-seqs and --max-num-batched-tokens",
    )),
    (("text-generation", "text_generation"), Server(
        "TGI", "lower --cuda-memory-fraction", "TGI --max-batch-total-tokens and --max-batch-prefill-tokens",
    )),
    (("sglang",), Server(
        "SGLang", "lower --mem-fraction-static", "SGLang --max-running-requests and --chunked-prefill-size",
    )),
    (("tritonserver",), Server(
        "Triton", "limit the model instances or the backend's memory pool in config.pbtxt",
        "Triton dynamic batching (dynamic_batching { max_queue_delay_microseconds, preferred_batch_size } "
        "in config.pbtxt)",
    )),
)
"""Command-line markers of each server family, most specific first."""

GENERIC = Server(
    "the server",
    "lower its memory reservation (vLLM --gpu-memory-utilization, TGI --cuda-memory-fraction, SGLang --mem-fraction-static)",
    "vLLM --max-num-seqs/--max-num-batched-tokens, TGI --max-batch-total-tokens, Triton dynamic batching",
)
"""Knobs of every family, for a server whose command line names none of them."""


def server_of(process: ProcessSample) -> Server:
    """The server family of an inference process, by its command line (GENERIC when unknown)."""
    command = (process.cmdline or process.name or "").lower()
    for markers, server in SERVERS:
        if any(marker in command for marker in markers):
            return server
    return GENERIC
