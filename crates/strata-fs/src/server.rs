//! The metadata server: a TCP listener, one thread per connection, and the
//! dispatch of requests to the local store or (on server 0) the coordinator.

use std::io::BufReader;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

use crate::config::ClusterConfig;
use crate::coord::Coordinator;
use crate::error::{FsError, FsResult};
use crate::proto::{read_frame, write_frame, Frame, Request, Response};
use crate::store::Store;

/// A running server's state.
#[derive(Debug)]
pub struct Server {
    store: Arc<Store>,
    coord: Option<Coordinator>,
    inval_keep: std::time::Duration,
}

impl Server {
    /// Opens server `me`'s store from the config; server 0 also becomes the
    /// coordinator.
    pub fn open(cfg: &ClusterConfig, me: usize) -> anyhow::Result<Arc<Server>> {
        let entry = cfg.servers.get(me).ok_or_else(|| anyhow::anyhow!("no server {me} in config"))?;
        let store = Arc::new(Store::open(&entry.datadir, me, cfg.servers.len(), cfg.sync, cfg.small)?);
        let coord = if me == 0 { Some(Coordinator::new(store.clone(), cfg.addrs())?) } else { None };
        let inval_keep = std::time::Duration::from_secs(cfg.inval_keep_secs);
        Ok(Arc::new(Server { store, coord, inval_keep }))
    }

    /// Binds, starts intent recovery (coordinator) in the background and
    /// serves until the process ends.
    pub fn serve(self: Arc<Self>, addr: &str) -> anyhow::Result<()> {
        // A restarted server may find its port briefly held; retry a while.
        let mut tries = 0;
        let listener = loop {
            match TcpListener::bind(addr) {
                Ok(l) => break l,
                Err(e) if tries < 100 => {
                    tries += 1;
                    if tries == 1 {
                        eprintln!("strata-fs-server: bind {addr}: {e}; retrying");
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(e) => return Err(e.into()),
            }
        };
        if self.coord.is_some() {
            let me = self.clone();
            std::thread::spawn(move || {
                if let Some(c) = &me.coord {
                    match c.recover() {
                        Ok(0) => {}
                        Ok(n) => eprintln!("strata-fs-server: rolled {n} pending intent(s) forward"),
                        Err(e) => eprintln!("strata-fs-server: intent recovery failed: {e}"),
                    }
                }
            });
        }
        let store = self.store.clone();
        let keep = self.inval_keep;
        std::thread::spawn(move || loop {
            std::thread::sleep(
                (keep / 4).clamp(std::time::Duration::from_millis(100), std::time::Duration::from_secs(60)),
            );
            if let Err(e) = store.prune_inval(keep) {
                eprintln!("strata-fs-server: pruning the invalidation list: {e}");
            }
        });
        for conn in listener.incoming() {
            let Ok(stream) = conn else { continue };
            let me = self.clone();
            std::thread::spawn(move || me.connection(stream));
        }
        Ok(())
    }

    fn connection(&self, stream: TcpStream) {
        let _ = stream.set_nodelay(true);
        let Ok(mut w) = stream.try_clone() else { return };
        let mut r = BufReader::new(stream);
        while let Ok(Some(frame)) = read_frame::<Frame>(&mut r) {
            let resp = match frame {
                Frame::One(req) => self.handle(req),
                Frame::Batch(reqs) => Response::Batch(reqs.into_iter().map(|r| self.handle(r)).collect()),
            };
            if write_frame(&mut w, &resp).is_err() {
                return;
            }
        }
    }

    fn coord(&self) -> FsResult<&Coordinator> {
        self.coord.as_ref().ok_or_else(|| FsError::Invalid("not the coordinator (server 0)".into()))
    }

    /// Answers one request.
    pub fn handle(&self, req: Request) -> Response {
        let s = &self.store;
        let entry = |r: FsResult<(crate::types::AccessRec, u64)>| r.map(|(rec, seq)| Response::Entry { rec, seq });
        let r: FsResult<Response> = match req {
            Request::Ping => Ok(Response::Ok),
            Request::Lookup { pid, name, cred, path } => entry(s.lookup(pid, &name, &cred, &path)),
            Request::GetContent { id } => s.content(id).and_then(|c| c.map(Response::Content).ok_or(FsError::NotFound)),
            Request::Create { pid, name, mode, cred, path } => entry(s.create(pid, &name, mode, &cred, &path)),
            Request::Unlink { pid, name, cred, path } => s.unlink(pid, &name, &cred, &path).map(|()| Response::Ok),
            Request::Readdir { id, after, limit, cred, path } => s
                .readdir(id, after.as_deref(), limit, &cred, &path)
                .map(|(entries, next)| Response::Dir { entries, next }),
            Request::SetAttrFile { pid, name, attr, cred, path } => {
                entry(s.setattr_file(pid, &name, &attr, &cred, &path))
            }
            Request::RenameLocal { spid, sname, dpid, dname, cred, path } => {
                s.rename_local((spid, &sname), (dpid, &dname), &cred, &path).map(|()| Response::Ok)
            }
            Request::Mkdir { pid, name, mode, cred, path } => {
                self.coord().and_then(|c| entry(c.mkdir(pid, &name, mode, &cred, &path)))
            }
            Request::Rmdir { pid, name, cred, path } => {
                self.coord().and_then(|c| c.rmdir(pid, &name, &cred, &path)).map(|()| Response::Ok)
            }
            Request::Rename { spid, sname, dpid, dname, cred, path } => {
                self.coord().and_then(|c| c.rename((spid, &sname), (dpid, &dname), &cred, &path)).map(|()| Response::Ok)
            }
            Request::SetAttrDir { pid, name, attr, cred, path } => {
                self.coord().and_then(|c| entry(c.setattr_dir(pid, &name, &attr, &cred, &path)))
            }
            Request::Step(step) => s.step(&step).map(Response::Step),
            Request::Scan { prefix, after, limit } => s.scan(&prefix, &after, limit).map(Response::Kvs),
            Request::Pending => self.coord().and_then(|c| c.pending()).map(Response::Count),
        };
        r.into()
    }
}
