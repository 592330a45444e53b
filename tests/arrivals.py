"""How change events arrive in the property tests: some delivered twice, in a random order, cut into
batches. The tests assert the table depends on none of it."""

from __future__ import annotations

import random


def arrival_batches(events: list, batches: int, seed: int, *, replay: bool = False) -> list[list]:
    """The events (up to two of them twice, by the seed) shuffled and cut into up to `batches` batches;
    with `replay`, one of the batches delivered again at the end."""
    draw = random.Random(seed)
    delivered = events + draw.sample(events, k=min(seed % 3, len(events)))
    draw.shuffle(delivered)
    cuts = sorted(draw.sample(range(1, len(delivered)), k=min(batches - 1, len(delivered) - 1)))
    loaded = [delivered[start:end] for start, end in zip([0, *cuts], [*cuts, len(delivered)], strict=True)]
    return loaded + [draw.choice(loaded)] if replay else loaded
