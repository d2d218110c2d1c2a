"""Samples and tokens in a batch, read from tensor shapes only (never a value, so never a CUDA sync).

On the first batch :class:`BatchCounter` finds *where* to look: the batch's first tensor (its leading dimension
is the samples) and, where there is one, the tensor of token ids (an integer tensor of two or more dimensions,
preferably under a key named ``input_ids``; its number of elements is the tokens, padding included). Later
batches only follow those two paths (getters composed once) and read a ``.shape``; a batch laid out differently
is searched again, and batches of a type found to hold no tensor are not searched again.
Batches may be tensors, tuples and lists, dicts (a Hugging Face ``BatchEncoding`` is one) and objects with
attributes (dataclasses), nested a few levels deep.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from operator import attrgetter, itemgetter
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


def getter(path: Path) -> Callable[[Any], Any]:
    """A function that follows ``path`` from a batch (item and attribute getters, composed once)."""
    steps = [itemgetter(key) if is_item else attrgetter(key) for is_item, key in path]
    if len(steps) == 1:
        return steps[0]

    def follow(value: Any) -> Any:
        for step in steps:
            value = step(value)
        return value

    return follow


class BatchCounter:
    """Counts the samples and tokens of each batch from the shapes of two tensors found on the first batch."""

    def __init__(self) -> None:
        self._samples_of: Callable[[Any], Any] | None = None
        self._tokens_of: Callable[[Any], Any] | None = None
        self._barren: type | None = None

    def counts(self, batch: Any) -> tuple[int | None, int | None]:
        """(samples, tokens) of ``batch``; None for what it does not hold."""
        if self._samples_of is not None:
            found = self._read(batch)
            if found is not None:
                return found
        if type(batch) is self._barren or not self._search(batch):
            return None, None
        return self._read(batch) or (None, None)

    def _read(self, batch: Any) -> tuple[int, int | None] | None:
        """(samples, tokens) read where the last search found them; None when ``batch`` is laid out differently."""
        try:
            samples = self._samples_of(batch).shape[0]  # type: ignore[misc]  # _read runs only once it is set
            tokens = None if self._tokens_of is None else self._tokens_of(batch).numel()
        except (LookupError, TypeError, AttributeError):
            return None
        return samples, tokens

    def _search(self, batch: Any) -> bool:
        """Find the tensors in ``batch``; False (and no search again for batches of its type) when it holds none with a
        leading dimension."""
        shaped = [(path, tensor) for path, tensor in _tensors(batch) if tensor.dim() >= 1]
        if not shaped:
            self._samples_of = self._tokens_of = None
            self._barren = type(batch)
            return False
        self._barren = None
        self._samples_of = getter(shaped[0][0])
        tokens = [path for path, tensor in shaped if _is_tokens(tensor)]
        named = [path for path in tokens if path and path[-1][1] == TOKEN_KEY]
        self._tokens_of = getter(named[0]) if named else getter(tokens[0]) if tokens else None
        return True
