//! The state every connection shares: the store, the accounting, the
//! injected faults and the authentication settings, behind one `Arc`.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;

use crate::auth::Auth;
use crate::faults::Faults;
use crate::stats::Accounting;
use crate::store::Store;

/// State shared by every connection.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) store: Mutex<Store>,
    pub(crate) accounting: Mutex<Accounting>,
    pub(crate) faults: Mutex<Faults>,
    pub(crate) bookmark_interval: Duration,
    /// Bumped to end every open watch.
    pub(crate) close_watches: watch::Sender<u64>,
    /// `host:port`, as discovery reports the server's address.
    pub(crate) address: String,
    pub(crate) auth: Auth,
}
