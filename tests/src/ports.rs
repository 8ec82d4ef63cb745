//! Ports for daemons a test starts as processes.
//!
//! In-process daemons ([`crate::TestRoot`], [`crate::TestHub`], the fakes of the tests) bind
//! `127.0.0.1:0` and hand back their bound address; nothing here is needed for them. An
//! `mcp-root serve` process also takes `listen = "127.0.0.1:0"` and announces the address it
//! bound on stderr (`mcp-root listening on <base url> (MCP endpoint ...)`): start it that way
//! and read the address back with [`announced_root_url`]. A root started again on the same
//! data (after a SIGKILL) is given the port it announced, so its hubs find it again; that
//! port is free again only once the first process has died, a window of the restart's moment.
//!
//! [`free_port`] is for the rest: a port number that must be written down before the process
//! that binds it starts (a managed service's `--port` and health URL in a hub's config,
//! chromedriver's `--port`, an OAuth redirect nobody serves).

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::process::Proc;

/// A loopback port that was free a moment ago: bound on `127.0.0.1:0`, released, and its
/// number handed on to a process that binds it itself.
///
/// Between the release and that bind another process can take the port. The window is bounded
/// this way: Linux picks a port-0 bind at a random offset in the ephemeral range, so another
/// `bind(0)` in the suite is unlikely to land on the port just released; and this function
/// never hands out the same number twice in one test process, so two of its own callers cannot
/// collide. Where a lost race happens anyway, the service or driver that binds does not come
/// up and the test fails saying so, never with a wrong answer. (A retry is not cheap at the
/// call sites: the port is in a hub's config before the hub starts the service.)
pub fn free_port() -> u16 {
    static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let given = given.get_or_insert_with(HashSet::new);
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        if given.insert(port) {
            return port;
        }
    }
}

/// The line prefix `mcp-root serve` announces its bound address with (root/src/cli).
const ROOT_LISTENING: &str = "mcp-root listening on ";

/// The base URL (`http://127.0.0.1:<port>` or `https://...`) an `mcp-root serve` process
/// started on `127.0.0.1:0` announces in its log; panics with the log if it exits or says
/// nothing within `within`.
pub async fn announced_root_url(root: &mut Proc, within: Duration) -> String {
    let start = Instant::now();
    loop {
        if let Some(url) = root_url_in(&root.log_text()) {
            return url;
        }
        if let Some(status) = root.try_wait() {
            panic!("{} exited ({status}):\n{}", root.name(), root.log_text());
        }
        assert!(
            start.elapsed() < within,
            "{} announced no address within {within:?}:\n{}",
            root.name(),
            root.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The address in the last `mcp-root listening on` line of `log` (a root started again on the
/// same log announces again).
pub fn root_url_in(log: &str) -> Option<String> {
    log.lines()
        .rev()
        .filter_map(|l| l.strip_prefix(ROOT_LISTENING))
        .find_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
}

/// The port of a base URL such as `http://127.0.0.1:4100`.
pub fn port_of(base_url: &str) -> u16 {
    base_url
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("no port in {base_url}"))
}
