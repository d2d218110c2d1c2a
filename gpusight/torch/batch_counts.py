"""Samples and tokens in a batch, read from tensor shapes only (never a value, so never a CUDA sync).

On the first batch :class:`BatchCounter` finds *where* to look: the batch's first tensor (its leading dimension
is the samples) and, where there is one, the tensor of token ids (an integer tensor of two or more dimensions,
preferably under a key named ``input_ids``; its number of elements is the tokens, padding included). Later
batches only follow those two paths and read a ``.shape``; a batch laid out differently is searched again.
Batches may be tensors, tuples and lists, dicts (a Hugging Face ``BatchEncoding`` is one) and objects with
attributes (dataclasses), nested a few levels deep.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import torch

TOKEN_KEY = "input_ids"
"""The key or attribute preferred as the token ids."""
MAX_DEPTH = 4
"""How deep into nested containers the search goes."""

Path = tuple[tuple[bool, Any], ...]
"""Steps from the batch to a tensor: (True, key or index) for an item, (False, name) for an attribute."""


def _children(value: Any) -> Iterator[tuple[tuple[bool, Any], Any]]:
    """The (step, child) pairs of a container; none for anything else."""
    if isinstance(value, Mapping):
        for key in value:
            yield (True, key), value[key]
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield (True, index), item
    elif hasattr(value, "__dict__") and not isinstance(value, (type, torch.nn.Module)):
        for name, item in vars(value).items():
            if not name.startswith("_"):
                yield (False, name), item


def _tensors(value: Any, path: Path = (), depth: int = 0) -> Iterator[tuple[Path, torch.Tensor]]:
    """Every tensor in ``value`` with its path, depth first in the container's order."""
    if isinstance(value, torch.Tensor):
        yield path, value
    elif depth < MAX_DEPTH and not isinstance(value, (str, bytes)):
        for step, child in _children(value):
            yield from _tensors(child, (*path, step), depth + 1)


def _is_tokens(tensor: torch.Tensor) -> bool:
    """An integer tensor of at least two dimensions (batch x sequence)."""
    return tensor.dim() >= 2 and not tensor.is_floating_point() and not tensor.is_complex() \
        and tensor.dtype != torch.bool


def follow(batch: Any, path: Path) -> torch.Tensor | None:
    """The tensor at ``path`` in ``batch``, or None when the batch is laid out differently."""
    value = batch
    try:
        for is_item, key in path:
            value = value[key] if is_item else getattr(value, key)
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    return value if isinstance(value, torch.Tensor) else None


class BatchCounter:
    """Counts the samples and tokens of each batch from the shapes of two tensors found on the first batch."""

    def __init__(self) -> None:
        self._samples_path: Path | None = None
        self._tokens_path: Path | None = None
        self._searched = False

    def counts(self, batch: Any) -> tuple[int | None, int | None]:
        """(samples, tokens) of ``batch``; None for what it does not hold."""
        first = None if self._samples_path is None else follow(batch, self._samples_path)
        if first is None or first.dim() == 0:
            if not self._search(batch):
                return None, None
            first = follow(batch, self._samples_path) if self._samples_path is not None else None
            if first is None or first.dim() == 0:
                return None, None
        tokens = None
        if self._tokens_path is not None:
            ids = follow(batch, self._tokens_path)
            tokens = math.prod(ids.shape) if ids is not None and ids.dim() >= 2 else None
        return first.shape[0], tokens

    def _search(self, batch: Any) -> bool:
        """Find the paths in ``batch``; False when it holds no tensor with a leading dimension."""
        found = list(_tensors(batch))
        shaped = [(path, tensor) for path, tensor in found if tensor.dim() >= 1]
        if not shaped:
            self._samples_path = self._tokens_path = None
            return False
        self._samples_path = shaped[0][0]
        tokens = [(path, tensor) for path, tensor in shaped if _is_tokens(tensor)]
        named = [path for path, _ in tokens if path and path[-1][1] == TOKEN_KEY]
        self._tokens_path = named[0] if named else tokens[0][0] if tokens else None
        return True
