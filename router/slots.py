"""The engine's worker slots: one per job driven at once, all their bookkeeping in one place.

The dispatcher takes a slot for each claimed job it drives (`take`). A job whose first attempt
starts with it, in the transaction that creates or claims it, has its slot reserved before
that transaction (`reserve`): once committed the reservation is handed to the job's driver,
which releases the slot when done; if the transaction fails it is given back. `stop` waits for
every reservation to end (`settled`): a job committed meanwhile is then stopped like the others.
"""

from __future__ import annotations

import asyncio


class Slots:
    def __init__(self, count: int) -> None:
        self._free = asyncio.Semaphore(count)
        self._reserved = 0  # reservations not yet handed over nor given back
        self._settled = asyncio.Event()  # set when _reserved is 0
        self._settled.set()

    @property
    def full(self) -> bool:
        return self._free.locked()

    async def take(self) -> None:
        """Wait for a free slot and take it (released with `release`)."""
        await self._free.acquire()

    def release(self) -> None:
        self._free.release()

    async def reserve(self) -> Reservation | None:
        """A free slot for a job not committed yet, or None when none is free."""
        if self._free.locked():
            return None
        await self._free.acquire()  # free: returns at once
        self._reserved += 1
        self._settled.clear()
        return Reservation(self)

    async def settled(self) -> None:
        """Wait until no reservation is pending."""
        await self._settled.wait()

    def _end(self) -> None:
        self._reserved -= 1
        if self._reserved == 0:
            self._settled.set()


class Reservation:
    """A slot taken for a job not committed yet. Ends once: handed over or given back."""

    def __init__(self, slots: Slots) -> None:
        self._slots = slots
        self._open = True

    def handed_over(self) -> None:
        """The job's driver holds the slot now; it releases it when done."""
        if self._open:
            self._open = False
            self._slots._end()

    def give_back(self) -> None:
        """The job was not committed (or already existed): the slot is free again. Does
        nothing once handed over."""
        if self._open:
            self._open = False
            self._slots.release()
            self._slots._end()
