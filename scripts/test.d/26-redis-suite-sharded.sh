#!/usr/bin/env bash
# Redis's own tests against strata-server --shards 2 (the p2KVS front end):
# a hash's meta and fields, a sorted set's members and a transaction's keys
# land on different shards, so these units exercise cross-shard batches and
# merged scans. Same runner, same ratchet as 25-redis-suite.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
REDIS_SUITE_SERVER_ARGS="--shards 2" \
    REDIS_SUITE_UNITS="${REDIS_SUITE_SHARDED_UNITS:-type/incr type/hash type/zset multi keyspace}" \
    exec bash scripts/test.d/25-redis-suite.sh
