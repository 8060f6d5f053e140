import json
import socket
import urllib.request

import pytest
import redis

from app import kv


def test_ping(r):
    assert r.ping()


def test_service_name_resolves():
    assert socket.gethostbyname("redis")
    assert socket.gethostbyname("app")


def test_version(expect_version):
    assert kv.VERSION == expect_version


def test_app_health(expect_version):
    with urllib.request.urlopen("http://app:8000/health", timeout=10) as f:
        assert json.load(f) == {"ok": True, "version": expect_version}


def test_counter_1(r, ns):
    for _ in range(1):
        kv.incr(r, ns)
    assert kv.count(r, ns) == 1


def test_counter_2(r, ns):
    for _ in range(2):
        kv.incr(r, ns)
    assert kv.count(r, ns) == 2


def test_counter_3(r, ns):
    for _ in range(3):
        kv.incr(r, ns)
    assert kv.count(r, ns) == 3


def test_counter_4(r, ns):
    for _ in range(4):
        kv.incr(r, ns)
    assert kv.count(r, ns) == 4


def test_counter_5(r, ns):
    for _ in range(5):
        kv.incr(r, ns)
    assert kv.count(r, ns) == 5


def test_counter_6(r, ns):
    for _ in range(6):
        kv.incr(r, ns)
    assert kv.count(r, ns) == 6


def test_counter_7(r, ns):
    for _ in range(7):
        kv.incr(r, ns)
    assert kv.count(r, ns) == 7


def test_counter_8(r, ns):
    for _ in range(8):
        kv.incr(r, ns)
    assert kv.count(r, ns) == 8


@pytest.mark.parametrize("n", [1, 5, 20, 100])
def test_queue_fifo(r, ns, n):
    for i in range(n):
        kv.push(r, ns, {"i": i})
    assert [kv.pop(r, ns)["i"] for _ in range(n)] == list(range(n))
    assert kv.pop(r, ns) is None


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_leaderboard(r, ns, k):
    for i, who in enumerate("abcdef"):
        kv.score(r, ns, who, i * 10)
    kv.score(r, ns, "a", 1000)
    want = [("a", 1000), ("f", 50), ("e", 40), ("d", 30), ("c", 20)][:k]
    assert kv.top(r, ns, k) == want


@pytest.mark.parametrize("fields", [{"u": "x"}, {"u": "y", "role": "admin"}, {"a": "1", "b": "2", "c": "3"}])
def test_session(r, ns, fields):
    kv.session_put(r, ns, fields, ttl=30)
    assert kv.session_get(r, ns) == fields
    assert 0 < r.ttl("sess:" + ns) <= 30


def test_pipeline(r, ns):
    p = r.pipeline()
    for i in range(50):
        p.incr("count:" + ns)
    assert p.execute()[-1] == 50


def test_app_counts_hits(r, ns):
    for want in (1, 2, 3):
        with urllib.request.urlopen("http://app:8000/" + ns, timeout=10) as f:
            assert json.load(f)["hits"] == want
    assert kv.count(r, "hits:/" + ns) == 3


def test_missing_key(r, ns):
    assert kv.count(r, ns) == 0
    assert kv.session_get(r, ns) == {}


def test_wrong_type(r, ns):
    r.set("q:" + ns, "x")
    with pytest.raises(redis.ResponseError):
        kv.pop(r, ns)


@pytest.mark.parametrize("by", [1, 7, -3])
def test_incr_by(r, ns, by):
    assert kv.incr(r, ns, by) == by
    assert kv.incr(r, ns, by) == 2 * by
