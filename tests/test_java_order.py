"""Java's HashSet iteration order, which decides the order of Kafka's clearing lines."""
from __future__ import annotations

from kreassign.cluster.java_order import broker_set_order, string_hash, topic_set_order


def test_string_hash_is_javas() -> None:
    # "foo".hashCode() == 101574; non-BMP text hashes its UTF-16 surrogates
    assert string_hash("foo") == 101574
    assert string_hash("") == 0
    assert string_hash("𝄞") == (31 * 0xD834 + 0xDD1E)


def test_orders_a_jvm_prints() -> None:
    # each expected list was printed by Java 17's `Collectors.toSet()` over the same input order
    assert topic_set_order(["bar", "foo"]) == ["bar", "foo"]
    assert topic_set_order(["baz", "foo"]) == ["foo", "baz"]
    assert topic_set_order(["Ωmega", "naïve", "foo", "日本"]) == ["naïve", "foo", "日本", "Ωmega"]
    assert topic_set_order("foo,baz,bar,t-0,t-1,t-2,orders,payments,__consumer_offsets,logs,x,metrics,events,a,b,"
                           "clicks,zzz".split(",")) == (
        "a,b,foo,payments,bar,t-0,t-2,x,t-1,clicks,baz,orders,metrics,zzz,logs,__consumer_offsets,events".split(","))
    assert broker_set_order([1, 17, 33, 2, 1024, 1025, 1020, 1021, 1022, 1023, 100000, 65536, 65537, 5, 6, 7]) == [
        1024, 65537, 1, 33, 1025, 100000, 65536, 2, 5, 6, 7, 17, 1020, 1021, 1022, 1023]


def test_small_broker_ids_come_out_ascending_and_duplicates_once() -> None:
    assert broker_set_order([5, 3, 1, 3, 4, 2]) == [1, 2, 3, 4, 5]
