//! A service's log file, capped in size ([`CappedLog`]: past the cap it becomes `<path>.1` and
//! a new one starts), and the pump that copies a child's output into it.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt};

/// A log file capped at `cap` bytes: past it, the file becomes `<path>.1` and a new one starts.
pub(crate) struct CappedLog {
    path: PathBuf,
    cap: u64,
    file: Option<File>,
    size: u64,
    warned: bool,
}

impl CappedLog {
    /// Opens `path` for appending (creating it and its directory).
    pub(crate) fn open(path: &Path, cap: u64) -> std::io::Result<CappedLog> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let size = file.metadata()?.len();
        Ok(CappedLog {
            path: path.to_owned(),
            cap: cap.max(1),
            file: Some(file),
            size,
            warned: false,
        })
    }

    /// The previous part of a log at `path`.
    pub(crate) fn rotated_path(path: &Path) -> PathBuf {
        let mut name = path.as_os_str().to_owned();
        name.push(".1");
        PathBuf::from(name)
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.file = None;
        std::fs::rename(&self.path, Self::rotated_path(&self.path))?;
        self.file = Some(
            std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(true)
                .open(&self.path)?,
        );
        self.size = 0;
        Ok(())
    }

    fn write_capped(&mut self, mut bytes: &[u8]) -> std::io::Result<()> {
        while !bytes.is_empty() {
            if self.size >= self.cap || self.file.is_none() {
                self.rotate()?;
            }
            let room = usize::try_from(self.cap - self.size).unwrap_or(usize::MAX);
            let n = room.min(bytes.len());
            if let Some(f) = self.file.as_mut() {
                f.write_all(&bytes[..n])?;
            }
            self.size += n as u64;
            bytes = &bytes[n..];
        }
        Ok(())
    }

    /// Appends `bytes`, rotating as often as needed; a failure is logged once and the bytes
    /// are dropped (a full disk must not stop the service).
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        if let Err(e) = self.write_capped(bytes) {
            if !self.warned {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot write a service log; output is dropped");
                self.warned = true;
            }
        } else {
            self.warned = false;
        }
    }
}

pub(super) async fn pump(mut pipe: impl AsyncRead + Unpin, log: Arc<Mutex<CappedLog>>) {
    let mut buf = vec![0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => log
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .write(&buf[..n]),
        }
    }
}
