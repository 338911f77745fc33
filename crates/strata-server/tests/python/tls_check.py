"""redis-py with ssl=True against strata-server's TLS port (called by
tests/tls.rs): PING, SET/GET, a pipeline. Arguments: port, CA file,
client certificate, client key."""
import sys

import redis

port, ca, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
r = redis.Redis(host="localhost", port=port, ssl=True, ssl_ca_certs=ca, ssl_certfile=cert, ssl_keyfile=key)
assert r.ping()
assert r.set("py", "tls")
assert r.get("py") == b"tls"
p = r.pipeline()
for i in range(100):
    p.set(f"k{i}", i)
p.get("k99")
assert p.execute()[-1] == b"99"
print("redis-py over TLS: ok")
