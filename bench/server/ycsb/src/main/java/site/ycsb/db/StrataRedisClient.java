package site.ycsb.db;

import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;

import redis.clients.jedis.Jedis;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/**
 * A YCSB binding that issues the same Redis commands as YCSB's own Redis
 * binding: a record is a hash written with HMSET (success means the reply
 * is "OK") and read with HGETALL or HMGET; every key is also a member of
 * the sorted set "_indices", scored by the key's Java hashCode, and a scan
 * is ZRANGEBYSCORE _indices hash(start) +inf LIMIT 0 n followed by one read
 * per key. One connection per YCSB thread.
 *
 * Properties: redis.host (default 127.0.0.1), redis.port (6379),
 * redis.password, redis.timeout (ms, default 10000).
 */
public class StrataRedisClient extends DB {
  /** The sorted set indexing every record key. */
  public static final String INDEX_KEY = "_indices";

  private Jedis jedis;

  @Override
  public void init() throws DBException {
    Properties p = getProperties();
    String host = p.getProperty("redis.host", "127.0.0.1");
    int port = Integer.parseInt(p.getProperty("redis.port", "6379"));
    int timeout = Integer.parseInt(p.getProperty("redis.timeout", "10000"));
    jedis = new Jedis(host, port, timeout);
    jedis.connect();
    String password = p.getProperty("redis.password");
    if (password != null) {
      jedis.auth(password);
    }
  }

  @Override
  public void cleanup() throws DBException {
    jedis.close();
  }

  private static double indexScore(String key) {
    return key.hashCode();
  }

  @Override
  public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
    if (fields == null) {
      StringByteIterator.putAllAsByteIterators(result, jedis.hgetAll(key));
    } else {
      String[] names = fields.toArray(new String[0]);
      List<String> values = jedis.hmget(key, names);
      Iterator<String> v = values.iterator();
      for (String name : names) {
        if (!v.hasNext()) {
          break;
        }
        String value = v.next();
        if (value != null) {
          result.put(name, new StringByteIterator(value));
        }
      }
    }
    return result.isEmpty() ? Status.ERROR : Status.OK;
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    if (!"OK".equals(jedis.hmset(key, StringByteIterator.getStringMap(values)))) {
      return Status.ERROR;
    }
    jedis.zadd(INDEX_KEY, indexScore(key), key);
    return Status.OK;
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    return "OK".equals(jedis.hmset(key, StringByteIterator.getStringMap(values))) ? Status.OK : Status.ERROR;
  }

  @Override
  public Status delete(String table, String key) {
    long removed = jedis.del(key);
    long unindexed = jedis.zrem(INDEX_KEY, key);
    return removed == 0 && unindexed == 0 ? Status.ERROR : Status.OK;
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    Set<String> keys = jedis.zrangeByScore(INDEX_KEY, indexScore(startkey), Double.POSITIVE_INFINITY, 0, recordcount);
    for (String key : keys) {
      HashMap<String, ByteIterator> values = new HashMap<String, ByteIterator>();
      read(table, key, fields, values);
      result.add(values);
    }
    return Status.OK;
  }
}
