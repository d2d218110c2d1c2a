"""Plain-text formatting of metric values with units; None always renders as ``N/A``."""

from __future__ import annotations

NA = "N/A"
"""Shown for a metric that is unknown or unsupported."""

_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_DECIMAL_RATE_UNITS = ("B/s", "kB/s", "MB/s", "GB/s", "TB/s")


def fmt_bytes(value: float | None) -> str:
    """Bytes in binary units with three significant figures, e.g. ``61.2GiB``."""
    return _scaled(value, 1024, _BINARY_UNITS)


def fmt_rate(value: float | None) -> str:
    """Bytes per second in decimal units, e.g. ``1.2GB/s``."""
    return _scaled(value, 1000, _DECIMAL_RATE_UNITS)


def _scaled(value: float | None, step: int, units: tuple[str, ...]) -> str:
    """``value`` in the largest unit that keeps it below ``step``: whole bytes, else 3 significant figures."""
    if value is None:
        return NA
    size = float(value)
    unit = units[-1]
    for candidate in units[:-1]:
        if abs(size) < step:
            unit = candidate
            break
        size /= step
    if unit == units[0]:
        return f"{size:.0f}{unit}"
    return f"{size:.3g}{unit}" if abs(size) < 100 else f"{size:.0f}{unit}"


def fmt_percent(value: float | None) -> str:
    """A percentage without decimals, e.g. ``97%``."""
    return NA if value is None else f"{value:.0f}%"


def fmt_watts(value: float | None) -> str:
    """Watts without decimals, e.g. ``612W``."""
    return NA if value is None else f"{value:.0f}W"


def fmt_celsius(value: float | None) -> str:
    """Degrees Celsius without decimals, e.g. ``71C``."""
    return NA if value is None else f"{value:.0f}C"


def fmt_mhz(value: float | None) -> str:
    """A clock in MHz, e.g. ``1980MHz``."""
    return NA if value is None else f"{value:.0f}MHz"


def fmt_duration(seconds: float | None) -> str:
    """Elapsed time as ``M:SS``, ``H:MM:SS`` or ``Nd HH:MM``."""
    if seconds is None or seconds < 0:
        return NA
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}:{minutes:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"
