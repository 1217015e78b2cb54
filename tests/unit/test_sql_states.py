"""The SQL restates state sets as literal lists (`state IN ('started', 'unknown')`): in the
named queries, and in the migrations, where a partial index's predicate must read as its
queries' do, so the lists cannot be generated there. This test finds every literal list in
router/store's SQL and ties each, at its place, to a named set of router/states.py (or to the
error kinds a provider's classification gives); a state added to a set, or one dropped from a
list, fails here until both agree. A single literal (`state = 'started'`, `kind = 'job.failed'`)
must be a value of one of the vocabularies."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from jobrouter.providers.errors import ErrorKind
from jobrouter.states import (
    ATTEMPT_OPEN_STATES,
    JOB_ACTIVE_STATES,
    JOB_SETTLED_STATES,
    JOB_TERMINAL_STATES,
    AttemptState,
    CircuitState,
    EndReason,
    EventKind,
    JobState,
)
from jobrouter.store.connector import parse_named_queries

STORE = Path(__file__).resolve().parents[2] / "router" / "store"

# error_kind holds an attempt's end reason: a provider's classification (ErrorKind) or one of
# the router's own, all in the closed enum states.EndReason.
PROVIDER_ERROR_KINDS = frozenset(ErrorKind)
ERROR_KINDS = frozenset(EndReason)

NAMED_SETS: dict[frozenset[str], str] = {
    frozenset(JOB_TERMINAL_STATES): "JOB_TERMINAL_STATES",
    frozenset(JOB_SETTLED_STATES): "JOB_SETTLED_STATES",
    frozenset(JOB_ACTIVE_STATES): "JOB_ACTIVE_STATES",
    frozenset(ATTEMPT_OPEN_STATES): "ATTEMPT_OPEN_STATES",
    PROVIDER_ERROR_KINDS: "PROVIDER_ERROR_KINDS",
}

# Every literal list of the SQL, by (file, query; "" for a migration) and the set it means,
# as often as it occurs there.
EXPECTED_LISTS: list[tuple[str, str, frozenset[str]]] = [
    ("queries.sql", "open_attempts_of_job", ATTEMPT_OPEN_STATES),
    ("queries.sql", "claim_runnable", JOB_ACTIVE_STATES),
    ("queries.sql", "renew_claims", JOB_ACTIVE_STATES),
    ("queries.sql", "count_open_jobs", JOB_ACTIVE_STATES),
    ("queries.sql", "count_purgeable", JOB_TERMINAL_STATES),
    ("queries.sql", "count_kept_undelivered", JOB_TERMINAL_STATES),
    ("queries.sql", "purge_jobs", JOB_TERMINAL_STATES),
    ("queries_postgres.sql", "claim_runnable", JOB_ACTIVE_STATES),
    ("migrations/postgres/0001_init.sql", "", JOB_ACTIVE_STATES),  # index jobs_runnable
    ("migrations/postgres/0001_init.sql", "", JOB_TERMINAL_STATES),  # index jobs_finished
    ("migrations/postgres/0001_init.sql", "", JOB_ACTIVE_STATES),  # jobs_notify_released
    ("migrations/postgres/0009_settled_notify.sql", "", JOB_SETTLED_STATES),
    ("migrations/postgres/0011_error_detail.sql", "", PROVIDER_ERROR_KINDS),
    ("migrations/postgres/0011_error_detail.sql", "", PROVIDER_ERROR_KINDS),
    ("migrations/postgres/0012_server_waits.sql", "", JOB_ACTIVE_STATES),
    ("migrations/postgres/0013_await_runnable_at.sql", "", JOB_ACTIVE_STATES),
    ("migrations/sqlite/0001_init.sql", "", JOB_ACTIVE_STATES),
    ("migrations/sqlite/0001_init.sql", "", JOB_TERMINAL_STATES),
    ("migrations/sqlite/0011_error_detail.sql", "", PROVIDER_ERROR_KINDS),
    ("migrations/sqlite/0011_error_detail.sql", "", PROVIDER_ERROR_KINDS),
]

# `x IN ('a', 'b')`, `x NOT IN (...)`, `json_extract(...) IN (...)`: a list of literals only
LITERAL_LIST = re.compile(r"\bIN\s*\(\s*('[^']*'(?:\s*,\s*'[^']*')*)\s*\)", re.I)
LITERAL = re.compile(r"'([^']*)'")
# `state = 'x'`, `j.state <> 'x'`, `kind = 'x'`, `error_kind = 'x'`
SINGLE = re.compile(r"\b(?:\w+\.)?(state|kind|error_kind)\s*(?:=|<>|!=)\s*'([^']*)'", re.I)
VOCABULARIES: dict[str, frozenset[str]] = {
    "state": frozenset({*JobState, *AttemptState, *CircuitState}),
    "kind": frozenset(EventKind),
    "error_kind": ERROR_KINDS,
}
# live_watch.state is the drift rule's JSON (jobrouter.drift.Watch); a reinstated watch's is ''.
NOT_A_STATE = {("queries.sql", "reinstate_watch", "state", "")}


def sql_files() -> list[Path]:
    return sorted(STORE.glob("*.sql")) + sorted(STORE.glob("migrations/*/*.sql"))


def statements() -> Iterator[tuple[str, str, str]]:
    """(file relative to router/store, query name or "" for a migration, its SQL without
    comments)."""
    for path in sql_files():
        name = str(path.relative_to(STORE))
        text = path.read_text("utf-8")
        if path.parent == STORE:
            for query, sql in parse_named_queries(text).items():
                yield name, query, sql
        else:
            yield name, "", "\n".join(line.split("--")[0] for line in text.splitlines())


def literal_lists() -> Counter[tuple[str, str, frozenset[str]]]:
    return Counter(
        (file, query, frozenset(LITERAL.findall(match[1])))
        for file, query, sql in statements()
        for match in LITERAL_LIST.finditer(sql)
    )


def shown(found: Counter[tuple[str, str, frozenset[str]]]) -> list[str]:
    return sorted(
        f"{file} {query or '(migration)'}: {NAMED_SETS.get(values, sorted(values))} x{n}"
        for (file, query, values), n in found.items()
    )


def test_the_sql_finds_lists_in_every_kind_of_file() -> None:
    """The finder itself: it sees the lists of the queries, the PostgreSQL overrides and the
    migrations of both dialects, and reads a list with and without spaces."""
    files = {file for file, _, _ in literal_lists()}
    assert {"queries.sql", "queries_postgres.sql"} <= files
    assert any(f.startswith("migrations/sqlite/") for f in files)
    assert any(f.startswith("migrations/postgres/") for f in files)
    found = [LITERAL.findall(m[1]) for m in LITERAL_LIST.finditer("WHERE x.state in ('a','b')")]
    assert found == [["a", "b"]]


def test_every_literal_list_of_the_sql_is_a_named_set_of_the_states() -> None:
    """mutants seen failing: 'unknown' dropped from open_attempts_of_job's list (queries.sql);
    'unknown' added to purge_jobs' list; 'unknown' dropped from the settled trigger of
    migrations/postgres/0009; JobState.UNKNOWN made terminal in states.py (the retention
    lists no longer match JOB_TERMINAL_STATES)."""
    expected = Counter((file, query, frozenset(values)) for file, query, values in EXPECTED_LISTS)
    found = literal_lists()
    assert not found - expected, ("in the SQL, not as expected", shown(found - expected))
    assert not expected - found, ("expected, not in the SQL", shown(expected - found))


def test_every_named_list_is_one_of_the_sets_named_in_states() -> None:
    for _, _, values in EXPECTED_LISTS:
        assert values in NAMED_SETS


def test_every_single_literal_is_a_value_of_its_vocabulary() -> None:
    """mutant seen failing: expired_attempts' `state = 'started'` spelled 'start'."""
    wrong = [
        (file, query, column, value)
        for file, query, sql in statements()
        for column, value in SINGLE.findall(sql)
        if value not in VOCABULARIES[column.lower()]
        and (file, query, column, value) not in NOT_A_STATE
    ]
    assert not wrong, wrong
    for allowed in NOT_A_STATE:  # an allowance that no longer matches anything goes
        file, query, column, value = allowed
        sql = dict(((f, q), s) for f, q, s in statements())[(file, query)]
        assert (column, value) in SINGLE.findall(sql), allowed
