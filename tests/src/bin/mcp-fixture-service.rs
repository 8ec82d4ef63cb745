//! `mcp-fixture-service`: a tiny long-running service for the managed-service and ProfileOps
//! tests (std only).
//!
//! - `--port N`: answers HTTP on 127.0.0.1:N: `GET /healthz` → 200 `ok`, `GET /exit` → 200 and
//!   the process exits with status 0, anything else → 404.
//! - `--log-every-ms N` (default 200): writes `tick <n>` to stdout every N ms.
//! - `--print-secret`: each tick also writes a planted secret line
//!   (`Authorization: Bearer sk_live_…`), so tests can prove that logs are redacted on the hub.
//! - `--leak-kib-per-sec N`: allocates and touches N KiB per second (in ten steps) and never
//!   frees it, so its resident memory grows steadily.
//! - `--mode NAME`: printed at start (`mode NAME`), to tell a profiling start from a normal one.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// A planted secret the hub must never let out.
pub const SECRET_LINE: &str = "Authorization: Bearer sk_live_fixture0123456789abcdef";

struct Options {
    port: Option<u16>,
    log_every_ms: u64,
    print_secret: bool,
    leak_kib_per_sec: u64,
    mode: String,
}

fn usage(msg: &str) -> ! {
    eprintln!(
        "mcp-fixture-service: {msg}\nusage: mcp-fixture-service [--port N] [--log-every-ms N] [--print-secret] [--leak-kib-per-sec N] [--mode NAME]"
    );
    std::process::exit(2)
}

fn parse() -> Options {
    let mut o = Options {
        port: None,
        log_every_ms: 200,
        print_secret: false,
        leak_kib_per_sec: 0,
        mode: "normal".into(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| usage(&format!("{name} needs a value")))
        };
        let number = |name: &str, v: String| {
            v.parse::<u64>()
                .unwrap_or_else(|_| usage(&format!("{name}: `{v}` is not a number")))
        };
        match a.as_str() {
            "--port" => {
                let v = value("--port");
                o.port = Some(
                    v.parse()
                        .unwrap_or_else(|_| usage(&format!("--port: `{v}` is not a port"))),
                );
            }
            "--log-every-ms" => o.log_every_ms = number(&a, value("--log-every-ms")).max(1),
            "--print-secret" => o.print_secret = true,
            "--leak-kib-per-sec" => o.leak_kib_per_sec = number(&a, value("--leak-kib-per-sec")),
            "--mode" => o.mode = value("--mode"),
            other => usage(&format!("unknown argument `{other}`")),
        }
    }
    o
}

fn serve(stream: TcpStream) {
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut request = String::new();
    if reader.read_line(&mut request).is_err() {
        return;
    }
    // Skip the headers.
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let path = request.split_whitespace().nth(1).unwrap_or("");
    let (status, body, exit) = match path {
        "/healthz" => ("200 OK", "ok\n", false),
        "/exit" => ("200 OK", "bye\n", true),
        _ => ("404 Not Found", "not found\n", false),
    };
    let mut out = stream;
    let _ = write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = out.flush();
    if exit {
        println!("exiting on request");
        let _ = std::io::stdout().flush();
        std::process::exit(0);
    }
}

fn main() {
    let o = parse();
    println!("mode {}", o.mode);
    if let Some(port) = o.port {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .unwrap_or_else(|e| usage(&format!("cannot listen on 127.0.0.1:{port}: {e}")));
        println!(
            "listening on {}",
            listener
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default()
        );
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || serve(stream));
            }
        });
    }
    if o.leak_kib_per_sec > 0 {
        let step = (o.leak_kib_per_sec * 1024 / 10).max(1) as usize;
        std::thread::spawn(move || {
            let mut kept: Vec<Vec<u8>> = Vec::new();
            loop {
                leak_steadily(&mut kept, step);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
    }
    let mut tick: u64 = 0;
    loop {
        {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "tick {tick}");
            if o.print_secret {
                let _ = writeln!(out, "{SECRET_LINE}");
            }
            let _ = out.flush();
        }
        tick += 1;
        std::thread::sleep(Duration::from_millis(o.log_every_ms));
    }
}

/// The leak: `step` bytes more kept (every page touched, so it is resident). A function of
/// its own, so a heap profiler names it.
#[inline(never)]
fn leak_steadily(kept: &mut Vec<Vec<u8>>, step: usize) {
    let mut block = vec![0u8; step];
    for i in (0..block.len()).step_by(4096) {
        block[i] = 1;
    }
    kept.push(block);
}
