"""A spend report's query is checked before anything is read (jobrouter.spend_report): the
groups, the range's bounds and their defaults; a bad one raises SpendQueryInvalid naming the
parameter, the value and the fix."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from jobrouter.errors import SpendQueryInvalid
from jobrouter.spend_report import Group, spend_query

NOW = datetime(2026, 12, 4, 19, 30, tzinfo=UTC).timestamp()


def test_the_default_is_by_owner_over_this_utc_month() -> None:
    """Mutant killed: `month_of` ending the month at `now` (the rest of the month left out)."""
    query = spend_query(now=NOW)
    assert query.by == (Group.OWNER,)
    assert query.since == datetime(2026, 12, 1, tzinfo=UTC).timestamp()
    assert query.until == datetime(2027, 1, 1, tzinfo=UTC).timestamp()


def test_groups_come_as_a_list_or_comma_lists_in_order_once_each() -> None:
    query = spend_query(by=["task,day", "owner", "task"], now=NOW)
    assert query.by == (Group.TASK, Group.DAY, Group.OWNER)


@pytest.mark.parametrize(
    ("kwargs", "field", "said"),
    [
        ({"by": "owner,shop"}, "by", "'shop'"),
        ({"by": ["day", "month"]}, "by", "day and month"),
        ({"since": "yesterday"}, "since", "'yesterday'"),
        ({"until": "2026-13-01"}, "until", "'2026-13-01'"),
        ({"since": "0001-01-01T00:00:00+14:00"}, "since", "'0001-01-01T00:00:00+14:00'"),
        ({"since": "2026-12-05", "until": "2026-12-05"}, "until", "2026-12-05T00:00:00Z"),
        ({"since": "2026-12-06", "until": "2026-12-05"}, "until", "since 2026-12-06"),
    ],
)
def test_a_bad_query_names_the_parameter_the_value_and_the_fix(
    kwargs: dict[str, object], field: str, said: str
) -> None:
    """Mutant killed: `lower >= upper` written `>` (an empty range, since == until, read)."""
    with pytest.raises(SpendQueryInvalid) as caught:
        spend_query(now=NOW, **kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert said in caught.value.value
    assert str(caught.value).startswith(f"{field}: ")
    assert caught.value.hint


def test_a_date_is_its_utc_midnight_and_a_naive_time_is_utc() -> None:
    query = spend_query(since="2026-12-02", until=datetime(2026, 12, 3, 6), now=NOW)
    assert query.since == datetime(2026, 12, 2, tzinfo=UTC).timestamp()
    assert query.until == datetime(2026, 12, 3, 6, tzinfo=UTC).timestamp()
    assert spend_query(since=date(2026, 12, 2), now=NOW).since == query.since
    offset = spend_query(since="2026-12-02T01:00:00+01:00", now=NOW)
    assert offset.since == query.since
