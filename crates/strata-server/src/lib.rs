//! strata-server: the StrataKV engine behind the Redis protocol (RESP2,
//! and RESP3 after `HELLO 3`), so redis-cli, redis-py, Jedis, go-redis,
//! redis-benchmark and YCSB work unchanged.
//!
//! Module map: [`resp`] (protocol), [`net`] (event loops) and [`server`]
//! (accepting), [`cmd`] (commands by type), [`keyspace`] (types and expiry
//! on the ordered keyspace), [`store`] (engine, or memory with command log
//! or snapshots), [`expiry`] (background sweep), [`pubsub`] (subscriptions
//! and delivery), [`tls`] (the TLS port's settings), [`replication`] (following a
//! Redis primary), [`config`], [`shutdown`].

pub mod cmd;
pub mod config;
pub mod expiry;
pub mod glob;
pub mod keyspace;
pub mod layout;
pub mod net;
pub mod numbers;
pub mod pubsub;
pub mod rdb;
pub mod replication;
pub mod resp;
pub mod server;
pub mod shutdown;
pub mod store;
pub mod tls;
pub mod tuning;
