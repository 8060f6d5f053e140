import os
import uuid

import pytest
import redis

from app import kv


@pytest.fixture
def r():
    c = kv.connect()
    yield c
    c.close()


@pytest.fixture
def ns():
    """A fresh name per test: tests share one Redis."""
    return uuid.uuid4().hex


@pytest.fixture
def expect_version():
    return os.environ.get("EXPECT_VERSION", "v1")
