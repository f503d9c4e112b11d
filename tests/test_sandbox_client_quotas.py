"""KIP-13 quota math and entity matching of the sandbox, without the network (Kafka's Rate,
QuotaUtils.throttleTime, DefaultQuotaCallback precedence, ClientQuotaControlManager checks)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kreassign.cluster.errors import InputError
from kreassign.sandbox.client_quotas import (
    CLIENT_ID, CONSUMER_BYTE_RATE, MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED, PRODUCER_BYTE_RATE, USER,
    ClientQuotaManager, ClientQuotas, QuotaConfigs, QuotaRequestError, Rate, parse_default_quota, throttle_time_ms,
)


def test_a_new_rate_is_spread_over_ten_windows() -> None:
    rate = Rate()
    rate.record(1000, 0)
    assert rate.window_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(100.0)


def test_the_window_grows_with_elapsed_time_past_ten_windows() -> None:
    rate = Rate()
    rate.record(1000, 0)
    rate.record(1000, 2500)
    # oldest sample starts at 0: 2500 ms elapsed, 2 full windows, padded by 8 more
    assert rate.window_ms(2500) == 10_500
    assert rate.measure(2500) == pytest.approx(2000 / 10.5)
    for t in range(3000, 14_000, 1000):
        rate.record(0, t)
    # 11 s later the first sample (last event at 0) is purged; the oldest kept one started at
    # 2500 and overlaps the window, so the window is 11 s and holds its 1000 bytes
    assert rate.window_ms(13_500) == 11_000
    assert rate.measure(13_500) == pytest.approx(1000 / 11)


def test_idle_rate_forgets_everything_after_eleven_windows() -> None:
    rate = Rate()
    rate.record(5000, 0)
    assert rate.measure(11_000) == 0.0
    assert rate.window_ms(11_000) == 10_000


def test_throttle_time_is_kafkas_formula() -> None:
    assert throttle_time_ms(200.0, 100.0, 10_000) == 10_000
    assert throttle_time_ms(150.0, 100.0, 10_500) == 5250
    assert throttle_time_ms(100.00005, 100.0, 10_000) == 0  # Math.round(0.005)


def test_producer_over_its_quota_is_throttled_and_bytes_stay_recorded() -> None:
    quotas = ClientQuotas()
    quotas.set_default(PRODUCER_BYTE_RATE, 100)
    qm = quotas.for_broker(1)
    assert qm.produce_throttle_ms("p", "ANONYMOUS", 1000, 0.0) == 0  # 100 B/s: exactly the bound
    # 2000 B over a 10 s window = 200 B/s: (200-100)/100 * 10 s
    assert qm.produce_throttle_ms("p", "ANONYMOUS", 1000, 0.0) == 10_000
    assert qm.rates[(PRODUCER_BYTE_RATE, "", "p")].measure(0) == pytest.approx(200.0)
    # another client id has its own rate under a default client-id quota, and another broker its own
    assert qm.produce_throttle_ms("q", "ANONYMOUS", 1000, 0.0) == 0
    assert quotas.for_broker(2).produce_throttle_ms("p", "ANONYMOUS", 1000, 0.0) == 0
    assert quotas.for_broker(1) is qm


def test_fetch_over_its_quota_unrecords_the_bytes() -> None:
    qm = ClientQuotaManager()
    qm.configs.alter([(CLIENT_ID, "c")], [(CONSUMER_BYTE_RATE, 100.0)])
    assert qm.fetch_throttle_ms("c", "ANONYMOUS", 1000, 0.0) == 0
    assert qm.fetch_throttle_ms("c", "ANONYMOUS", 1000, 0.0) == 10_000
    assert qm.rates[(CONSUMER_BYTE_RATE, "", "c")].measure(0) == pytest.approx(100.0)


def test_no_quota_means_no_recording() -> None:
    qm = ClientQuotaManager()
    assert qm.produce_throttle_ms("p", "ANONYMOUS", 10**9, 0.0) == 0
    assert qm.rates == {}


def test_a_producer_honouring_its_throttles_converges_to_the_quota() -> None:
    quota = 1_000_000.0
    qm = ClientQuotaManager()
    qm.configs.alter([(USER, None)], [(PRODUCER_BYTE_RATE, quota)])
    now, sent, batch = 0.0, 0, 64_000
    while now < 120.0:
        throttle = qm.produce_throttle_ms("p", "ANONYMOUS", batch, now)
        sent += batch
        now += max(throttle / 1000.0, 0.01)  # a fast producer: 6.4 MB/s unthrottled
    assert sent / now == pytest.approx(quota, rel=0.10)


def _levels() -> list[tuple[tuple[tuple[str, str | None], ...], tuple[str, str]]]:
    """Kafka's precedence order: entity and the metric tags (user, client-id) it gives."""
    return [
        (((USER, "alice"), (CLIENT_ID, "app")), ("alice", "app")),
        (((USER, "alice"), (CLIENT_ID, None)), ("alice", "app")),
        (((USER, "alice"),), ("alice", "")),
        (((USER, None), (CLIENT_ID, "app")), ("alice", "app")),
        (((USER, None), (CLIENT_ID, None)), ("alice", "app")),
        (((USER, None),), ("alice", "")),
        (((CLIENT_ID, "app"),), ("", "app")),
        (((CLIENT_ID, None),), ("", "app")),
    ]


@given(st.sets(st.integers(0, 7), min_size=1))
def test_the_most_specific_entity_wins(chosen: set[int]) -> None:
    configs = QuotaConfigs()
    levels = _levels()
    for i in chosen:
        configs.alter(list(levels[i][0]), [(PRODUCER_BYTE_RATE, float(1000 + i))])
        configs.alter([(USER, "bob")], [(PRODUCER_BYTE_RATE, 7.0)])  # another user never matches alice
    best = min(chosen)
    assert configs.match(PRODUCER_BYTE_RATE, "alice", "app") == (levels[best][1], 1000.0 + best)
    assert configs.match(CONSUMER_BYTE_RATE, "alice", "app") == (("", "app"), None)


@pytest.mark.parametrize(("entity", "ops", "message"), [
    ([], [(PRODUCER_BYTE_RATE, 1.0)], "Invalid empty client quota entity"),
    ([(USER, "a"), (USER, "b")], [(PRODUCER_BYTE_RATE, 1.0)],
     "Invalid client quota entity, duplicate entity entry user"),
    ([("group", "g")], [(PRODUCER_BYTE_RATE, 1.0)], "Unhandled client quota entity type: group"),
    ([(USER, "")], [(PRODUCER_BYTE_RATE, 1.0)], "Empty user not supported"),
    ([("ip", "127.0.0.1"), (USER, "a")], [(PRODUCER_BYTE_RATE, 1.0)],
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ([(USER, "a")], [("connection_creation_rate", 1.0)], "Invalid configuration key connection_creation_rate"),
    ([(USER, "a")], [(PRODUCER_BYTE_RATE, 0.0)], "Quota producer_byte_rate must be greater than 0"),
    ([(USER, "a")], [(PRODUCER_BYTE_RATE, 1.5)], "producer_byte_rate cannot be a fractional value."),
    ([(USER, "a")], [(PRODUCER_BYTE_RATE, 1.0), (PRODUCER_BYTE_RATE, None)],
     "Duplicate quota key producer_byte_rate not updating quota for this entity"),
])
def test_alter_refuses_what_kafka_refuses(entity: list[tuple[str, str | None]], ops: list[tuple[str, float | None]],
                                          message: str) -> None:
    configs = QuotaConfigs()
    with pytest.raises(QuotaRequestError) as err:
        configs.alter(entity, ops)
    assert str(err.value) == message
    assert configs.entities == {}


def test_alter_sets_removes_and_validate_only_changes_nothing() -> None:
    configs = QuotaConfigs()
    configs.alter([(CLIENT_ID, "app")], [(PRODUCER_BYTE_RATE, 100.0), ("request_percentage", 12.5)])
    configs.alter([(CLIENT_ID, "app")], [(CONSUMER_BYTE_RATE, 5.0)], validate_only=True)
    assert configs.entities == {((CLIENT_ID, "app"),): {PRODUCER_BYTE_RATE: 100.0, "request_percentage": 12.5}}
    configs.alter([(CLIENT_ID, "app")], [(PRODUCER_BYTE_RATE, None), ("request_percentage", None)])
    assert configs.entities == {}


def test_describe_filters_like_kafka() -> None:
    configs = QuotaConfigs()
    configs.alter([(USER, "alice")], [(PRODUCER_BYTE_RATE, 1.0)])
    configs.alter([(USER, None)], [(PRODUCER_BYTE_RATE, 2.0)])
    configs.alter([(USER, "alice"), (CLIENT_ID, "app")], [(PRODUCER_BYTE_RATE, 3.0)])
    configs.alter([(CLIENT_ID, None)], [(CONSUMER_BYTE_RATE, 4.0)])

    def values(components: list[tuple[str, int, str | None]], strict: bool) -> list[float]:
        return sorted(v for _, vals in configs.describe(components, strict=strict) for v in vals.values())

    assert values([(USER, MATCH_EXACT, "alice")], False) == [1.0, 3.0]
    assert values([(USER, MATCH_EXACT, "alice")], True) == [1.0]
    assert values([(USER, MATCH_DEFAULT, None)], False) == [2.0]
    assert values([(USER, MATCH_SPECIFIED, None)], True) == [1.0, 2.0]
    assert values([(CLIENT_ID, MATCH_SPECIFIED, None)], False) == [3.0, 4.0]
    assert values([], False) == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(QuotaRequestError, match="MATCH_TYPE_EXACT, but set match string to null"):
        configs.describe([(USER, MATCH_EXACT, None)], strict=False)
    with pytest.raises(QuotaRequestError) as err:
        configs.describe([("group", MATCH_SPECIFIED, None)], strict=False)
    assert err.value.unsupported


def test_configs_survive_json() -> None:
    configs = QuotaConfigs()
    configs.alter([(USER, None), (CLIENT_ID, "x")], [(PRODUCER_BYTE_RATE, 9.0)])
    again = QuotaConfigs.from_json(configs.to_json())
    assert again.entities == configs.entities


def test_parse_default_quota() -> None:
    assert parse_default_quota("producer_byte_rate=1MB/s") == (PRODUCER_BYTE_RATE, 1_000_000)
    assert parse_default_quota("consumer_byte_rate = 512KiB/s") == (CONSUMER_BYTE_RATE, 524_288)
    with pytest.raises(InputError, match="is not a client quota"):
        parse_default_quota("request_percentage=5")
    with pytest.raises(InputError, match="is not a rate"):
        parse_default_quota("producer_byte_rate=fast")
