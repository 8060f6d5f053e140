"""A small store on Redis: counters, a queue, a leaderboard, sessions."""
import json
import os

import redis

VERSION = "v1"


def connect():
    return redis.Redis(host=os.environ.get("REDIS_HOST", "redis"), port=6379, decode_responses=True)


def incr(r, name, by=1):
    return r.incrby("count:" + name, by)


def count(r, name):
    return int(r.get("count:" + name) or 0)


def push(r, queue, item):
    r.rpush("q:" + queue, json.dumps(item))


def pop(r, queue):
    v = r.lpop("q:" + queue)
    return None if v is None else json.loads(v)


def score(r, board, who, points):
    r.zincrby("board:" + board, points, who)


def top(r, board, n=3):
    return [(w, int(s)) for w, s in r.zrevrange("board:" + board, 0, n - 1, withscores=True)]


def session_put(r, sid, data, ttl=60):
    r.hset("sess:" + sid, mapping=data)
    r.expire("sess:" + sid, ttl)


def session_get(r, sid):
    return r.hgetall("sess:" + sid)
