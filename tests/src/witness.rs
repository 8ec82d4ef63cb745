//! Two zones in one test: zone B's root witnesses zone A's trail. The keys (master keys in a
//! temporary directory, A's log key, B's cosigner) and B's root; `zone_a` configures zone A's
//! root to sign with its key and submit its checkpoints to B.

use std::path::PathBuf;

use mcp_root::audit::checkpoint::LogKey;
use mcp_root::audit::witness::cosign::Cosigner;
use mcp_root::config::{RootConfig, WitnessPeerConfig};
use mcp_root::secrets::MasterKey;

use crate::TestRoot;

/// Zone B's root, witnessing zone A's log (see the module header).
pub struct Witnessed {
    /// Where both master keys live (kept as long as this is).
    pub keys: tempfile::TempDir,
    /// Zone A's master key file.
    pub a_key: PathBuf,
    /// Zone A's log key (its checkpoints' signer).
    pub log: LogKey,
    /// Zone B's cosigner.
    pub cosigner: Cosigner,
    /// Zone B's root.
    pub b: TestRoot,
}

impl Witnessed {
    /// Derives the keys and starts zone B's root.
    pub async fn start() -> anyhow::Result<Witnessed> {
        let keys = tempfile::tempdir()?;
        let (a_key, b_key) = (keys.path().join("a.key"), keys.path().join("b.key"));
        let log = LogKey::derive(&MasterKey::load_or_create(&a_key)?.0, "zone-a");
        let cosigner = Cosigner::derive(
            &MasterKey::load_or_create(&b_key)?.0,
            &Cosigner::default_name("zone-b"),
        );
        let logs = vec![log.verifier_key().to_owned()];
        let b = TestRoot::start_with(|c| {
            c.zone = "zone-b".into();
            c.master_key_file = Some(b_key.clone());
            c.witness.logs = logs.clone();
        })
        .await?;
        Ok(Witnessed {
            keys,
            a_key,
            log,
            cosigner,
            b,
        })
    }

    /// Zone A's root configuration: its zone, its master key, and B as its witness.
    pub fn zone_a(&self, c: &mut RootConfig) {
        c.zone = "zone-a".into();
        c.master_key_file = Some(self.a_key.clone());
        c.audit.witnesses = vec![WitnessPeerConfig {
            url: self.b.url("/v1/root/witness"),
            key: self.cosigner.verifier_key(),
        }];
    }
}
