"""Progress bars for long runs (generation, materialization, audits): tqdm, or nothing."""

from __future__ import annotations

from tqdm.auto import tqdm


def progress_bar(total: int, desc: str, enabled: bool, unit: str = "episode") -> tqdm | None:
    """A tqdm bar over ``total`` items, or None when disabled or there is nothing to count."""
    if not enabled or total == 0:
        return None
    return tqdm(total=total, desc=desc, unit=unit, mininterval=1.0)
