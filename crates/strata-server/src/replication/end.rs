//! Why a replica's session with its primary ended, shared by the session
//! (`replica`) and the image loader (`load`).

use std::io;

/// Why a session with the primary ended.
pub(super) enum End {
    /// REPLICAOF changed or the server stops: do not reconnect.
    Stopped,
    /// The link failed: reconnect.
    Failed(String),
}

impl From<io::Error> for End {
    fn from(e: io::Error) -> End {
        End::Failed(e.to_string())
    }
}

impl From<String> for End {
    fn from(e: String) -> End {
        End::Failed(e)
    }
}
