"""`Router`'s operator side: tokens, readiness and metrics, circuits, the outbox's dead
letters, certifications and the live watch. What the edges (HTTP, console, CLI) need of these,
they ask here, never of the store: `Router` is the boundary (tests/unit/test_edge_boundary.py).

A part of `Router` (jobrouter.api), as jobrouter.reads is. The certification modules are
imported on use: a quick CLI command that opens a `Router` never loads them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from jobrouter.reads import RouterParts

if TYPE_CHECKING:
    from jobrouter.certifier import Cell, Pair
    from jobrouter.contracts import Certification
    from jobrouter.providers import Provider
    from jobrouter.store.circuits import CircuitRow
    from jobrouter.store.live_watch import WatchPoint
    from jobrouter.store.outbox import OutboxCounts, OutboxEvent
    from jobrouter.store.tokens import ApiToken


class Operations(RouterParts):
    # ---- who is calling ------------------------------------------------------------------------

    async def token(self, secret: str) -> ApiToken | None:
        """The record of a presented token, live, revoked or expired; None when unknown."""
        self._check_open()
        return await self.store.tokens.find_token(secret)

    async def live_token(self, secret: str) -> ApiToken | None:
        """The record of a presented token if it is live (not revoked, not expired)."""
        self._check_open()
        return await self.store.tokens.authenticate(secret)

    async def token_status(self, token_id: str) -> str:
        """`live`, `revoked`, `expired`, or `unknown`: whether an open stream may go on."""
        return await self.store.tokens.token_status(token_id)

    # ---- how this process is -------------------------------------------------------------------

    @property
    def worker_id(self) -> str | None:
        """This process's worker id (None: it runs no workers)."""
        return self.engine.worker_id if self.engine is not None else None

    @property
    def database_url(self) -> str:
        return self.store.url

    async def pending_migrations(self) -> list[int]:
        """This build's migrations the database has not applied (empty: current)."""
        return await self.store.health.pending_migrations()

    async def prove_write(self) -> None:
        """Write and commit one row; raises when the database takes no write now."""
        await self.store.health.prove_write()

    async def leader_holder(self) -> str | None:
        """Who runs the periodic work, as the database sees it (None: this router takes no
        part in the election)."""
        return await self.leader.holder() if self.leader is not None else None

    async def refresh_gauges(self) -> None:
        """Set /metrics' gauges from the store: open jobs, circuits, the outbox, budgets
        (read when scraped, never on a job's path)."""
        from jobrouter import metrics  # prometheus: only for a server, never a quick command

        circuits = [(row.provider, row.state) for row in await self.circuits()]
        metrics.set_gauges(await self.store.health.open_job_counts(), circuits)
        metrics.set_outbox_gauges(await self.store.outbox.outbox_counts())
        if self.config.budgets:
            await metrics.collect_budgets(self.store.spend, self.config.budgets, time.time())

    async def circuits(self) -> list[CircuitRow]:
        return await self.store.circuits.list_circuits()

    # ---- the outbox ----------------------------------------------------------------------------

    async def outbox_counts(self) -> OutboxCounts:
        """Undelivered events by owner, and dead letters by owner."""
        return await self.store.outbox.outbox_counts()

    async def dead_letters(self, limit: int = 50) -> list[OutboxEvent]:
        """The newest dead letters first."""
        return await self.store.outbox.dead_letters(limit)

    async def replay_dead(self, event_id: str | None = None) -> int:
        """Move the dead letter `event_id` (None: every one) back to pending, due now, tries
        reset; how many moved."""
        if event_id is None:
            return await self.store.outbox.replay_all_dead()
        return 1 if await self.store.outbox.replay_dead(event_id) else 0

    # ---- tasks and certifications --------------------------------------------------------------

    def provider(self, name: str) -> Provider:
        """The provider configured as `name` (built when first asked for)."""
        return self.providers[name]

    def task_names(self) -> list[str]:
        return sorted(self.tasks)

    def pairs_to_certify(
        self, *, provider: str | None = None, contract: str | None = None
    ) -> list[Pair]:
        """Every (provider, contract) the configured tasks route to, filtered by the options."""
        from jobrouter.certifier import pairs_to_certify

        return pairs_to_certify(self.config, self.tasks, provider=provider, contract=contract)

    async def certify(
        self, pair: Pair, *, progress: Callable[[str, int, int], None] | None = None
    ) -> Certification:
        """Certify the pair now, calling its provider, and keep the record (the gate routes
        by it), valid for [certification] ttl_days."""
        from jobrouter.certifier import certify_pair

        provider = self.provider(pair.provider)
        ttl_days = self.config.certification.ttl_days
        return await certify_pair(
            self.store.certifications, provider, pair, ttl_days=ttl_days, progress=progress
        )

    async def certification_matrix(self, pairs: list[Pair] | None = None) -> list[Cell]:
        """The stored status of each pair (default: every routed one), calling nobody."""
        from jobrouter.certifier import matrix

        chosen = self.pairs_to_certify() if pairs is None else pairs
        return await matrix(self.store.certifications, self.providers, chosen)

    async def reinstate(self, *, provider: str, contract: str, reason: str, by: str) -> None:
        """Bring back a pair its live answers suspended, on an operator's word (`reason`,
        `by`); `ReinstateRefused` when it is not suspended, not routed, or no reason given."""
        from jobrouter.watch import reinstate

        routed = [(pair.provider, pair.contract.name) for pair in self.pairs_to_certify()]
        await reinstate(
            self.store.certifications,
            routed,
            provider=provider,
            contract=contract,
            reason=reason,
            by=by,
        )

    async def live_watch_points(self) -> dict[tuple[str, str], list[WatchPoint]]:
        """Each pair's kept live-watch folds, oldest first."""
        return await self.store.live_watch.points()


__all__ = ["Operations"]
