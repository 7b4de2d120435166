"""A nemesis starts and heals once, whatever is called twice, and lands on the timeline."""

from __future__ import annotations

from chaos.nemesis import Nemesis, Timeline


class Counting(Nemesis):
    kind = "counting"

    def __init__(self, timeline: Timeline) -> None:
        super().__init__(timeline, "target-1")
        self.injected = 0
        self.healed = 0

    def inject(self) -> str:
        self.injected += 1
        return "injected"

    def heal(self) -> str:
        self.healed += 1
        return "injected, then healed"


def test_start_and_stop_are_idempotent_and_recorded() -> None:
    timeline = Timeline()
    nemesis = Counting(timeline)
    nemesis.stop()  # never started: nothing to heal
    assert nemesis.healed == 0 and timeline.events == []
    nemesis.start()
    nemesis.start()
    assert nemesis.injected == 1 and nemesis.active
    [event] = timeline.events
    assert (event.name, event.target, event.end_ms, event.detail) == (
        "counting", "target-1", None, "injected",
    )  # fmt: skip
    nemesis.stop()
    nemesis.stop()
    assert nemesis.healed == 1 and not nemesis.active
    [event] = timeline.events
    assert event.end_ms is not None and event.end_ms >= event.start_ms
    assert event.detail == "injected, then healed"


def test_events_from_elsewhere_join_the_timeline() -> None:
    timeline = Timeline()
    timeline.add("failover", "east->west", 10, 20, "f-1")
    assert [tuple(e) for e in timeline.events] == [("failover", "east->west", 10, 20, "f-1")]
