//! Times open/get/close (development aid).
use std::time::Instant;
fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "/tmp/open_time".into());
    let mut o = stratakv::Options::for_tests();
    o.write_buffer_size = 16 << 20;
    {
        let db = stratakv::Db::open(&dir, o.clone()).unwrap();
        for i in 0..3000 { db.put(format!("key{i:06}"), format!("v{i}")).unwrap(); }
    }
    for _ in 0..3 {
        let t = Instant::now();
        let db = stratakv::Db::open(&dir, o.clone()).unwrap();
        let t1 = t.elapsed();
        for i in 0..3000 { db.get(format!("key{i:06}")).unwrap(); }
        let t2 = t.elapsed();
        drop(db);
        println!("open {:?} gets {:?} total {:?}", t1, t2 - t1, t.elapsed());
    }
}
