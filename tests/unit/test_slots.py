"""`jobrouter.slots`: the engine's worker slots. A reservation (a slot for a job not committed
yet) ends once, handed over to the job's driver or given back; `settled` (what `stop` waits
for) holds until every reservation has ended."""

from __future__ import annotations

import asyncio

from jobrouter.slots import Slots


async def test_a_reservation_given_back_frees_its_slot_once() -> None:
    slots = Slots(1)
    slot = await slots.reserve()
    assert slot is not None and slots.full
    assert await slots.reserve() is None  # none free: the job goes queued
    slot.give_back()
    slot.give_back()  # ends once: a second give-back would free a slot never taken
    assert not slots.full
    await slots.take()
    assert slots.full


async def test_a_slot_handed_over_stays_taken_until_its_driver_releases_it() -> None:
    slots = Slots(1)
    slot = await slots.reserve()
    assert slot is not None
    slot.handed_over()
    slot.give_back()  # after the hand-over (the creating call's `finally`): nothing
    assert slots.full
    slots.release()  # the driver is done
    assert not slots.full


async def test_settled_waits_for_every_reservation_to_end() -> None:
    slots = Slots(2)
    first, second = await slots.reserve(), await slots.reserve()
    assert first is not None and second is not None
    settled = asyncio.create_task(slots.settled())
    first.handed_over()
    await asyncio.sleep(0)
    assert not settled.done()  # the second job is still committing
    second.give_back()
    await asyncio.wait_for(settled, 10)  # a guard against a hang only
