//! Commands added for issue 33, each request's reply bytes as
//! redis-server 7.0.15 sent them (captured from it; order-dependent
//! replies such as RANDOMKEY on several keys and SSCAN of several members
//! are left out). Every request also runs inside MULTI in
//! `added_commands_are_atomic_under_multi`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{connect, roundtrip, start};

#[test]
fn bit_commands() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"SETBIT b 7 1\r\nSETBIT b 100 1\r\nGETBIT b 100\r\nGETBIT b 101\r\nGETBIT nokey 5\r\nSETBIT b -1 1\r\nSETBIT b 5 2\r\nSETBIT b 4294967296 1\r\nBITCOUNT b\r\nBITCOUNT b 0 0\r\nBITCOUNT b 0 -1 BIT\r\nBITCOUNT b 1 -1 BYTE\r\nBITCOUNT b 0\r\nBITCOUNT nokey 0\r\nBITCOUNT b 0 1 foo\r\nBITCOUNT b a b\r\nSET s foobar\r\nBITCOUNT s 1 1\r\nBITCOUNT s 5 30 BIT\r\nBITPOS s 1\r\nBITPOS s 0\r\nBITPOS s 1 2\r\nBITPOS s 0 1 -1\r\nBITPOS s 1 7 15 BIT\r\nBITPOS nokey 0\r\nBITPOS nokey 1\r\nBITPOS s 2\r\nSET ff \"\xff\xff\"\r\nBITPOS ff 0\r\nBITPOS ff 0 0 -1\r\nBITPOS ff 0 0\r\nBITPOS ff 1 10 5\r\nBITOP AND d s b\r\nGET d\r\nBITOP OR d s b\r\nGET d\r\nBITOP XOR d s b nokey\r\nGET d\r\nBITOP NOT d s\r\nSTRLEN d\r\nBITOP NOT d s b\r\nBITOP FOO d s\r\nBITOP AND d nokey1 nokey2\r\nEXISTS d\r\nRPUSH l a b c\r\nBITOP AND d l\r\n",
        b":0\r\n:0\r\n:1\r\n:0\r\n:0\r\n-ERR bit offset is not an integer or out of range\r\n-ERR bit is not an integer or out of range\r\n-ERR bit offset is not an integer or out of range\r\n:2\r\n:1\r\n:2\r\n:1\r\n-ERR syntax error\r\n:0\r\n-ERR syntax error\r\n-ERR value is not an integer or out of range\r\n+OK\r\n:6\r\n:17\r\n:1\r\n:0\r\n:17\r\n:8\r\n:9\r\n:0\r\n:-1\r\n-ERR The bit argument must be 1 or 0.\r\n+OK\r\n:16\r\n:-1\r\n:16\r\n:-1\r\n:13\r\n$13\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\r\n:13\r\n$13\r\ngoobar\x00\x00\x00\x00\x00\x00\x08\r\n:13\r\n$13\r\ngoobar\x00\x00\x00\x00\x00\x00\x08\r\n:6\r\n:6\r\n-ERR BITOP NOT must be called with a single source key.\r\n-ERR syntax error\r\n:0\r\n:0\r\n:3\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
}

#[test]
fn rename_copy_and_object() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"RPUSH l a b c\r\nRENAME l l2\r\nLRANGE l2 0 -1\r\nRENAME nokey x\r\nRENAME l2 l2\r\nRENAMENX l2 l2\r\nSET x 1\r\nRENAMENX l2 x\r\nEXPIRE l2 100\r\nRENAME l2 x\r\nTTL x\r\nTYPE x\r\nLRANGE x 0 -1\r\nCOPY x y\r\nCOPY x y\r\nCOPY x y REPLACE\r\nCOPY x x\r\nCOPY x z DB 0\r\nCOPY x z FOO\r\nLRANGE z 0 -1\r\nTTL z\r\nMEMORY USAGE nokey\r\nMEMORY FOO\r\nDEL x y z\r\nRANDOMKEY\r\nOBJECT ENCODING nokey\r\nSET s 123\r\nSET t hello\r\nOBJECT ENCODING s\r\nOBJECT ENCODING t\r\nOBJECT FREQ s\r\nOBJECT REFCOUNT nokey\r\nOBJECT foo s\r\nOBJECT ENCODING\r\nHSET h a b\r\nOBJECT ENCODING h\r\nSADD st 1 2 3\r\nOBJECT ENCODING st\r\nSADD st x\r\nOBJECT ENCODING st\r\nZADD z 1 a\r\nOBJECT ENCODING z\r\nRPUSH l a\r\nOBJECT ENCODING l\r\nCONFIG SET foo bar\r\nCONFIG SET hash-max-listpack-entries x\r\nCONFIG SET hash-max-listpack-entries 1\r\nOBJECT ENCODING h\r\nCONFIG SET hash-max-listpack-entries 128 hash-max-listpack-entries 2\r\nCONFIG SET activerehashing maybe\r\nCONFIG SET maxclients 10000\r\nCONFIG SET hash-max-listpack-entries 128\r\nFUNCTION FLUSH\r\nFUNCTION FLUSH x\r\nFUNCTION LIST\r\n",
        b":3\r\n+OK\r\n*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n-ERR no such key\r\n+OK\r\n:0\r\n+OK\r\n:0\r\n:1\r\n+OK\r\n:100\r\n+list\r\n*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n:1\r\n:0\r\n:1\r\n-ERR source and destination objects are the same\r\n:1\r\n-ERR syntax error\r\n*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n:100\r\n$-1\r\n-ERR unknown subcommand 'FOO'. Try MEMORY HELP.\r\n:3\r\n$-1\r\n$-1\r\n+OK\r\n+OK\r\n$3\r\nint\r\n$6\r\nembstr\r\n-ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n$-1\r\n-ERR unknown subcommand 'foo'. Try OBJECT HELP.\r\n-ERR wrong number of arguments for 'object|encoding' command\r\n:1\r\n$8\r\nlistpack\r\n:3\r\n$6\r\nintset\r\n:1\r\n$9\r\nhashtable\r\n:1\r\n$8\r\nlistpack\r\n:1\r\n$9\r\nquicklist\r\n-ERR Unknown option or number of arguments for CONFIG SET - 'foo'\r\n-ERR CONFIG SET failed (possibly related to argument 'hash-max-listpack-entries') - argument couldn't be parsed into an integer\r\n+OK\r\n$8\r\nlistpack\r\n-ERR CONFIG SET failed (possibly related to argument 'hash-max-listpack-entries') - duplicate parameter\r\n-ERR CONFIG SET failed (possibly related to argument 'activerehashing') - argument must be 'yes' or 'no'\r\n+OK\r\n+OK\r\n+OK\r\n-ERR FUNCTION FLUSH only supports SYNC|ASYNC option\r\n*0\r\n",
    );
}

#[test]
fn collection_scans() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"SADD s a\r\nSSCAN s 0\r\nSSCAN s 0 MATCH a*\r\nSSCAN s 0 MATCH b*\r\nSSCAN s 0 COUNT 0\r\nSSCAN s 0 COUNT x\r\nSSCAN s 0 FOO 1\r\nSSCAN s x\r\nSSCAN s 0 MATCH\r\nSSCAN nokey 0\r\nHSET h f v g w\r\nHSCAN h 0 MATCH f\r\nZADD z 1.5 a\r\nZSCAN z 0\r\nHSCAN s 0\r\n",
        b":1\r\n*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n*2\r\n$1\r\n0\r\n*0\r\n-ERR syntax error\r\n-ERR value is not an integer or out of range\r\n-ERR syntax error\r\n-ERR invalid cursor\r\n-ERR syntax error\r\n*2\r\n$1\r\n0\r\n*0\r\n:2\r\n*2\r\n$1\r\n0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n:1\r\n*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$3\r\n1.5\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
}

#[test]
fn list_and_set_edits() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"RPUSH l a b c b d\r\nLINSERT l BEFORE b x\r\nLINSERT l AFTER d y\r\nLINSERT l AFTER nope y\r\nLINSERT l MIDDLE b y\r\nLINSERT nokey BEFORE a b\r\nLRANGE l 0 -1\r\nLREM l 1 b\r\nLRANGE l 0 -1\r\nLREM l -1 y\r\nLREM l 0 zzz\r\nLREM l x a\r\nLREM l 0 a\r\nLRANGE l 0 -1\r\nRPOPLPUSH l l2\r\nRPOPLPUSH l l\r\nLRANGE l 0 -1\r\nLMOVE l l2 LEFT LEFT\r\nLMOVE l l2 UP LEFT\r\nLRANGE l2 0 -1\r\nSET str v\r\nRPOPLPUSH l str\r\nRPOPLPUSH nokey str\r\nLRANGE l 0 -1\r\nLREM l 0 x\r\nLREM l 0 c\r\nEXISTS l\r\nSADD s1 a b c\r\nSADD s2 b c d\r\nSMOVE s1 s2 a\r\nSMOVE s1 s2 zz\r\nSMOVE s1 str b\r\nSMOVE s1 s1 b\r\nSINTERSTORE d s1 s2\r\nSMEMBERS d\r\nSUNIONSTORE d s1 s2 nokey\r\nSDIFFSTORE d s1 s2\r\nEXISTS d\r\nSINTERSTORE str s1 s2\r\nTYPE str\r\nSINTERCARD 2 s1 s2\r\nSINTERCARD 2 s1 s2 LIMIT 1\r\nSINTERCARD 0 s1\r\nSINTERCARD 3 s1 s2\r\nSINTERCARD 2 s1 s2 LIMIT -1\r\nSINTERCARD 1 l\r\n",
        b":5\r\n:6\r\n:7\r\n:-1\r\n-ERR syntax error\r\n:0\r\n*7\r\n$1\r\na\r\n$1\r\nx\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\nd\r\n$1\r\ny\r\n:1\r\n*6\r\n$1\r\na\r\n$1\r\nx\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\nd\r\n$1\r\ny\r\n:1\r\n:0\r\n-ERR value is not an integer or out of range\r\n:1\r\n*4\r\n$1\r\nx\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\nd\r\n$1\r\nd\r\n$1\r\nb\r\n*3\r\n$1\r\nb\r\n$1\r\nx\r\n$1\r\nc\r\n$1\r\nb\r\n-ERR syntax error\r\n*2\r\n$1\r\nb\r\n$1\r\nd\r\n+OK\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n$-1\r\n*2\r\n$1\r\nx\r\n$1\r\nc\r\n:1\r\n:1\r\n:0\r\n:3\r\n:3\r\n:1\r\n:0\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n:1\r\n:2\r\n*2\r\n$1\r\nb\r\n$1\r\nc\r\n:4\r\n:0\r\n:0\r\n:2\r\n+set\r\n:2\r\n:1\r\n-ERR numkeys should be greater than 0\r\n-ERR Number of keys can't be greater than number of args\r\n-ERR LIMIT can't be negative\r\n:0\r\n",
    );
}

#[test]
fn lex_ranges_and_expiretime() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"ZADD z 0 a 0 b 0 c 0 d 0 e\r\nZRANGEBYLEX z - +\r\nZRANGEBYLEX z [b (d\r\nZRANGEBYLEX z (b +\r\nZREVRANGEBYLEX z + -\r\nZREVRANGEBYLEX z (d [b\r\nZRANGEBYLEX z - + LIMIT 1 2\r\nZRANGEBYLEX z - + LIMIT 1 -1\r\nZRANGEBYLEX z - + LIMIT -1 2\r\nZRANGEBYLEX z - + LIMIT 1\r\nZRANGEBYLEX z b d\r\nZRANGEBYLEX z + -\r\nZLEXCOUNT z [b [d\r\nZLEXCOUNT z - +\r\nZLEXCOUNT nokey - +\r\nZRANGEBYLEX nokey - +\r\nSET k v\r\nZLEXCOUNT k - +\r\nEXPIRETIME k\r\nEXPIRETIME nokey\r\nPEXPIREAT k 1900000000999\r\nEXPIRETIME k\r\nPEXPIRETIME k\r\n",
        b":5\r\n*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n*2\r\n$1\r\nb\r\n$1\r\nc\r\n*3\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n*5\r\n$1\r\ne\r\n$1\r\nd\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n*2\r\n$1\r\nc\r\n$1\r\nb\r\n*2\r\n$1\r\nb\r\n$1\r\nc\r\n*4\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n*0\r\n-ERR syntax error\r\n-ERR min or max not valid string range item\r\n*0\r\n:3\r\n:5\r\n:0\r\n*0\r\n+OK\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n:-1\r\n:-2\r\n:1\r\n:1900000001\r\n:1900000000999\r\n",
    );
}

/// The new writes queue under MULTI and run in EXEC's one batch, and they
/// are as durable as every other write: acknowledged, then kill -9.
#[test]
fn added_commands_are_atomic_under_multi_and_durable() {
    let dir = tempfile::tempdir().unwrap();
    {
        let srv = start(dir.path(), &["--durability", "sync"]);
        let mut s = connect(srv.port);
        roundtrip(&mut s, b"RPUSH l a b c\r\nSADD s1 x y\r\n", b":3\r\n:2\r\n");
        roundtrip(
            &mut s,
            b"MULTI\r\nSETBIT bits 9 1\r\nLINSERT l AFTER b z\r\nRENAME l l2\r\nSMOVE s1 s2 x\r\n\
              SUNIONSTORE u s1 s2\r\nCOPY l2 l3\r\nLREM l3 0 a\r\nEXEC\r\n",
            b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n\
              *7\r\n:0\r\n:4\r\n+OK\r\n:1\r\n:2\r\n:1\r\n:1\r\n",
        );
        // Dropping the server kills it (SIGKILL).
    }
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"GETBIT bits 9\r\nEXISTS l\r\nLRANGE l2 0 -1\r\nLRANGE l3 0 -1\r\nSCARD s1\r\nSCARD s2\r\nSCARD u\r\n",
        b":1\r\n:0\r\n*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nz\r\n$1\r\nc\r\n*3\r\n$1\r\nb\r\n$1\r\nz\r\n$1\r\nc\r\n\
          :1\r\n:1\r\n:2\r\n",
    );
}

#[test]
fn zset_algebra_and_lmpop() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"ZADD z1 1 a 2 b 3 c\r\nZADD z2 1 b 2 c 3 d\r\nSADD s c d e\r\nZUNION 2 z1 z2\r\nZUNION 2 z1 z2 WITHSCORES\r\nZUNION 3 z1 z2 s WEIGHTS 1 2 3 WITHSCORES\r\nZUNION 2 z1 z2 AGGREGATE MAX WITHSCORES\r\nZUNION 2 z1 z2 AGGREGATE MIN WITHSCORES\r\nZINTER 2 z1 z2 WITHSCORES\r\nZINTER 3 z1 z2 s WITHSCORES\r\nZDIFF 2 z1 z2 WITHSCORES\r\nZDIFF 2 z1 z2 WEIGHTS 1 1\r\nZUNION 0 z1\r\nZUNION 3 z1 z2\r\nZUNION 2 z1 z2 WEIGHTS 1 x\r\nZUNION 2 z1 z2 AGGREGATE FOO\r\nZUNIONSTORE d 2 z1 z2 WITHSCORES\r\nZUNIONSTORE d 2 z1 z2 WEIGHTS 2 3\r\nZRANGE d 0 -1 WITHSCORES\r\nZINTERSTORE d 2 z1 nokey\r\nEXISTS d\r\nZDIFFSTORE d 2 z1 z2\r\nZRANGE d 0 -1 WITHSCORES\r\nZINTERSTORE d 0 z1\r\nSET str x\r\nZUNION 2 z1 str\r\nZADD inf 10 x\r\nZADD ninf -inf x\r\nZUNION 2 inf ninf WEIGHTS inf 1 WITHSCORES\r\nZUNIONSTORE str 1 z1\r\nTYPE str\r\nLMPOP 2 nokey l2 LEFT\r\nRPUSH l2 a b c\r\nLMPOP 2 nokey l2 RIGHT COUNT 5\r\nLMPOP 0 l\r\nLMPOP 3 a b LEFT\r\nLMPOP 1 l MIDDLE\r\nLMPOP 1 l LEFT COUNT 0\r\n",
        b":3\r\n:3\r\n:3\r\n*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nd\r\n$1\r\nc\r\n*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n3\r\n$1\r\nd\r\n$1\r\n3\r\n$1\r\nc\r\n$1\r\n5\r\n*10\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\ne\r\n$1\r\n3\r\n$1\r\nb\r\n$1\r\n4\r\n$1\r\nd\r\n$1\r\n9\r\n$1\r\nc\r\n$2\r\n10\r\n*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$1\r\n3\r\n*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n1\r\n$1\r\nc\r\n$1\r\n2\r\n$1\r\nd\r\n$1\r\n3\r\n*4\r\n$1\r\nb\r\n$1\r\n3\r\n$1\r\nc\r\n$1\r\n5\r\n*2\r\n$1\r\nc\r\n$1\r\n6\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n-ERR syntax error\r\n-ERR at least 1 input key is needed for 'zunion' command\r\n-ERR syntax error\r\n-ERR weight value is not a float\r\n-ERR syntax error\r\n-ERR syntax error\r\n:4\r\n*8\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n$1\r\n7\r\n$1\r\nd\r\n$1\r\n9\r\n$1\r\nc\r\n$2\r\n12\r\n:0\r\n:0\r\n:1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n-ERR at least 1 input key is needed for 'zinterstore' command\r\n+OK\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n:1\r\n:1\r\n*2\r\n$1\r\nx\r\n$1\r\n0\r\n:3\r\n+zset\r\n*-1\r\n:3\r\n*2\r\n$2\r\nl2\r\n*3\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n-ERR wrong number of arguments for 'lmpop' command\r\n-ERR syntax error\r\n-ERR syntax error\r\n-ERR count should be greater than 0\r\n",
    );
}

#[test]
fn zset_pops_hstrlen_and_pushx() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"ZADD z 1 a 2 b 3 c 4 d\r\nZPOPMAX z\r\nZPOPMAX z 2\r\nZPOPMAX nokey\r\nZPOPMAX nokey 2\r\nZPOPMAX z -1\r\nZADD z 1 a 2 b 3 c 4 d\r\nZMPOP 1 z MIN\r\nZMPOP 1 z MAX COUNT 2\r\nZMPOP 2 nokey z MAX COUNT 10\r\nZMPOP 1 z MAX\r\nZMPOP 0 z MIN\r\nZMPOP 1 z FOO\r\nZADD z 5 e\r\nBZPOPMIN z 0\r\nBZPOPMAX nokey 0.05\r\nBZMPOP 0.05 1 nokey MIN\r\nZADD z 1 x 2 y\r\nBZPOPMAX nokey z 0\r\nBZMPOP 0 1 z MIN COUNT 3\r\nHSET h f hello\r\nHSTRLEN h f\r\nHSTRLEN h g\r\nHSTRLEN nokey g\r\nLPUSHX nol a\r\nRPUSH l a\r\nLPUSHX l b c\r\nRPUSHX l d\r\nLRANGE l 0 -1\r\nSET str x\r\nLPUSHX str a\r\nHSTRLEN str a\r\nMULTI\r\nBZPOPMIN nokey 0\r\nEXEC\r\n",
        b":4\r\n*2\r\n$1\r\nd\r\n$1\r\n4\r\n*4\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nb\r\n$1\r\n2\r\n*0\r\n*0\r\n-ERR value is out of range, must be positive\r\n:3\r\n*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\nz\r\n*2\r\n*2\r\n$1\r\nd\r\n$1\r\n4\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n*-1\r\n-ERR numkeys should be greater than 0\r\n-ERR syntax error\r\n:1\r\n*3\r\n$1\r\nz\r\n$1\r\ne\r\n$1\r\n5\r\n*-1\r\n*-1\r\n:2\r\n*3\r\n$1\r\nz\r\n$1\r\ny\r\n$1\r\n2\r\n*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nx\r\n$1\r\n1\r\n:1\r\n:5\r\n:0\r\n:0\r\n:0\r\n:1\r\n:3\r\n:4\r\n*4\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\nd\r\n+OK\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n+OK\r\n+QUEUED\r\n*1\r\n*-1\r\n",
    );
}

#[test]
fn lpos() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"RPUSH l a b c 1 2 3 c c\r\nLPOS l c\r\nLPOS l c RANK 2\r\nLPOS l c RANK -1\r\nLPOS l c RANK -2 COUNT 0\r\nLPOS l c COUNT 0\r\nLPOS l c COUNT 2\r\nLPOS l c COUNT 0 MAXLEN 4\r\nLPOS l c RANK -1 COUNT 0 MAXLEN 2\r\nLPOS l c RANK 10\r\nLPOS l c RANK 10 COUNT 2\r\nLPOS l x\r\nLPOS l c RANK 0\r\nLPOS l c COUNT -1\r\nLPOS l c MAXLEN -1\r\nLPOS l c FOO 1\r\nLPOS l c COUNT\r\nLPOS l c COUNT x\r\nLPOS nokey c\r\nLPOS nokey c COUNT 1\r\nSET s v\r\nLPOS s c\r\nRPUSH l a\r\nLPOS l a RANK x\r\nLPOS l a MAXLEN x\r\n",
        b":8\r\n:2\r\n:6\r\n:7\r\n*2\r\n:6\r\n:2\r\n*3\r\n:2\r\n:6\r\n:7\r\n*2\r\n:2\r\n:6\r\n*1\r\n:2\r\n*2\r\n:7\r\n:6\r\n$-1\r\n*0\r\n$-1\r\n-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n-ERR COUNT can't be negative\r\n-ERR MAXLEN can't be negative\r\n-ERR syntax error\r\n-ERR syntax error\r\n-ERR COUNT can't be negative\r\n$-1\r\n*0\r\n+OK\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n:9\r\n-ERR value is not an integer or out of range\r\n-ERR MAXLEN can't be negative\r\n",
    );
}

#[test]
fn lcs() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"SET a ohmytext\r\nSET b mynewtext\r\nLCS a b\r\nLCS a b LEN\r\nLCS a b IDX\r\nLCS a b IDX WITHMATCHLEN MINMATCHLEN 4\r\nLCS a b IDX LEN\r\nLCS a b FOO\r\nLCS a nokey\r\nLCS nokey1 nokey2 IDX\r\nRPUSH l x\r\nLCS a l\r\nLCS a b MINMATCHLEN x\r\nLCS a\r\n",
        b"+OK\r\n+OK\r\n$6\r\nmytext\r\n:6\r\n*4\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n-ERR If you want both the length and indexes, please just use IDX.\r\n-ERR syntax error\r\n$0\r\n\r\n*4\r\n$7\r\nmatches\r\n*0\r\n$3\r\nlen\r\n:0\r\n:1\r\n-ERR The specified keys must contain string values\r\n-ERR value is not an integer or out of range\r\n-ERR wrong number of arguments for 'lcs' command\r\n",
    );
}

/// ZMSCORE, ZRANGESTORE, ZRANGE's BYLEX/REV/LIMIT rules, ZREMRANGEBY*,
/// ZINTERCARD, and the deterministic cases of SRANDMEMBER, HRANDFIELD and
/// ZRANDMEMBER (one element, counts, errors).
#[test]
fn zset_range_family_and_random_members() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"ZADD z 1 a 2 b 3 c 4 d 5 e\r\nZMSCORE z a x e\r\nZMSCORE nokey a\r\nZRANGESTORE dst z 1 3\r\nZRANGE dst 0 -1 WITHSCORES\r\nZRANGESTORE dst z (1 +inf BYSCORE LIMIT 1 2\r\nZRANGE dst 0 -1\r\nZRANGESTORE dst nokey 0 -1\r\nEXISTS dst\r\nZRANGESTORE dst z 0 -1 WITHSCORES\r\nZRANGE z 0 -1 LIMIT 1 2\r\nZRANGE z 0 -1 BYLEX WITHSCORES\r\nZRANGE z [e [b BYLEX REV LIMIT 1 2\r\nZRANGE z 5 2 BYSCORE REV WITHSCORES\r\nZRANGE z 0 -1 BYSCORE BYLEX\r\nZREMRANGEBYRANK z 0 0\r\nZREMRANGEBYSCORE z (4 +inf\r\nZREMRANGEBYSCORE z x 1\r\nZREMRANGEBYLEX z [b [c\r\nZRANGE z 0 -1\r\nZREMRANGEBYRANK z x 1\r\nZREMRANGEBYRANK z 0 -1\r\nEXISTS z\r\nZADD a 1 x 2 y 3 z\r\nSADD s y z w\r\nZINTERCARD 2 a s\r\nZINTERCARD 2 a s LIMIT 1\r\nZINTERCARD 0 a\r\nZINTERCARD 3 a s\r\nZINTERCARD 1 a LIMIT -1\r\nSRANDMEMBER nokey\r\nSRANDMEMBER nokey 3\r\nSRANDMEMBER s 0\r\nSRANDMEMBER s -9223372036854775808\r\nSRANDMEMBER s 1 2\r\nHSET h f v\r\nHRANDFIELD h\r\nHRANDFIELD h 1 WITHVALUES\r\nHRANDFIELD h -2\r\nHRANDFIELD h -9223372036854770000 WITHVALUES\r\nHRANDFIELD h 1 foo\r\nZRANDMEMBER nokey\r\nZRANDMEMBER nokey 1 WITHSCORES\r\nZADD one 1.5 m\r\nZRANDMEMBER one -2 WITHSCORES\r\nZRANDMEMBER one 5\r\nSET str x\r\nZRANDMEMBER str\r\nSRANDMEMBER str 1\r\n",
        b":5\r\n*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n5\r\n*1\r\n$-1\r\n:3\r\n*6\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$1\r\n4\r\n:2\r\n*2\r\n$1\r\nc\r\n$1\r\nd\r\n:0\r\n:0\r\n-ERR syntax error\r\n-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n-ERR syntax error, WITHSCORES not supported in combination with BYLEX\r\n*2\r\n$1\r\nd\r\n$1\r\nc\r\n*8\r\n$1\r\ne\r\n$1\r\n5\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nb\r\n$1\r\n2\r\n-ERR syntax error\r\n:1\r\n:1\r\n-ERR min or max is not a float\r\n:2\r\n*1\r\n$1\r\nd\r\n-ERR value is not an integer or out of range\r\n:1\r\n:0\r\n:3\r\n:3\r\n:2\r\n:1\r\n-ERR at least 1 input key is needed for 'zintercard' command\r\n-ERR syntax error\r\n-ERR LIMIT can't be negative\r\n$-1\r\n*0\r\n*0\r\n-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n-ERR syntax error\r\n:1\r\n$1\r\nf\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n*2\r\n$1\r\nf\r\n$1\r\nf\r\n-ERR value is out of range\r\n-ERR syntax error\r\n$-1\r\n*0\r\n:1\r\n*4\r\n$1\r\nm\r\n$3\r\n1.5\r\n$1\r\nm\r\n$3\r\n1.5\r\n*1\r\n$1\r\nm\r\n+OK\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
}

/// SORT and SORT_RO: numeric, ALPHA, DESC, LIMIT, BY (keys, hash fields,
/// nosort), GET (#, keys, hash fields, missing), STORE, errors.
#[test]
fn sort() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(dir.path(), &[]);
    let mut s = connect(srv.port);
    roundtrip(
        &mut s,
        b"RPUSH l 3 1 2 10\r\nSORT l\r\nSORT l DESC LIMIT 1 2\r\nSORT l ALPHA\r\nSET w_1 30\r\nSET w_2 20\r\nSET w_3 10\r\nHSET h_1 f a\r\nHSET h_10 f b\r\nSORT l BY w_*\r\nSORT l BY w_* GET # GET h_*->f GET nokey_*\r\nSORT l BY nosort\r\nSORT l STORE dst\r\nLRANGE dst 0 -1\r\nSORT l LIMIT 5 10\r\nSORT l LIMIT -1 2\r\nSORT l LIMIT 0 -1\r\nSADD s b a c\r\nSORT s ALPHA\r\nSORT s BY nosort STORE d2\r\nLRANGE d2 0 -1\r\nSORT s\r\nSET str x\r\nSORT str\r\nSORT nokey\r\nSORT nokey STORE dst\r\nEXISTS dst\r\nSORT l FOO\r\nSORT_RO l STORE x\r\nSORT_RO l DESC\r\nZADD z 3 a 1 b 2 c\r\nSORT z BY nosort\r\nSORT z BY nosort LIMIT 1 1\r\nSORT z ALPHA DESC\r\nSORT l BY h_*->f ALPHA\r\n",
        b":4\r\n*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n*2\r\n$1\r\n3\r\n$1\r\n2\r\n*4\r\n$1\r\n1\r\n$2\r\n10\r\n$1\r\n2\r\n$1\r\n3\r\n+OK\r\n+OK\r\n+OK\r\n:1\r\n:1\r\n*4\r\n$2\r\n10\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n1\r\n*12\r\n$2\r\n10\r\n$1\r\nb\r\n$-1\r\n$1\r\n3\r\n$-1\r\n$-1\r\n$1\r\n2\r\n$-1\r\n$-1\r\n$1\r\n1\r\n$1\r\na\r\n$-1\r\n*4\r\n$1\r\n3\r\n$1\r\n1\r\n$1\r\n2\r\n$2\r\n10\r\n:4\r\n*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n*0\r\n*2\r\n$1\r\n1\r\n$1\r\n2\r\n*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n:3\r\n*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n:3\r\n*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n-ERR One or more scores can't be converted into double\r\n+OK\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n*0\r\n:0\r\n:0\r\n-ERR syntax error\r\n-ERR syntax error\r\n*4\r\n$2\r\n10\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n1\r\n:3\r\n*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\na\r\n*1\r\n$1\r\nc\r\n*3\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n*4\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n1\r\n$2\r\n10\r\n",
    );
}
