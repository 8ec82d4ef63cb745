//! C2SP `tlog-cosignature` v1 (Ed25519): a witness's timestamped signature over a checkpoint,
//! as the `signed_note` crate's [`Signer`] and [`Verifier`], so a cosignature is one more
//! signature line of the checkpoint's note and a note with cosignatures verifies with the
//! crate's own `Note::verify`.
//!
//! The signed message is `cosignature/v1\ntime <unix seconds>\n` followed by the checkpoint's
//! body; the signature is the timestamp (8 bytes, big-endian) followed by the 64-byte Ed25519
//! signature; the key id is `SHA-256(name || "\n" || 0x04 || public key)[:4]`, and the
//! verifier key `<name>+<key id>+<base64(0x04 || public key)>`.

use base64::Engine;
use ed25519_dalek::{Signer as _, SigningKey, Verifier as _, VerifyingKey};
use signed_note::{Signer, Verifier};

use crate::secrets::MasterKey;

/// The signature type byte of an Ed25519 cosignature/v1 key.
pub const COSIGNATURE_V1: u8 = 0x04;
/// Purpose of the cosigner key's derivation from the master key.
const KEY_PURPOSE: &str = "audit witness cosigner ed25519 v1";
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Why a cosigner verifier key was refused.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("not `<name>+<8 hex digits>+<base64>`")]
    Format,
    #[error("not a cosignature/v1 key (its type byte is not 0x04)")]
    Algorithm,
    #[error("its key id does not match its name and key")]
    Id,
}

/// `<prefix>/<zone>` (a log's origin, a witness's name), with what a signed-note key name cannot hold (spaces, `+`) replaced.
pub(crate) fn key_name(prefix: &str, zone: &str) -> String {
    let zone: String = zone
        .chars()
        .map(|c| {
            if c.is_whitespace() || c == '+' {
                '-'
            } else {
                c
            }
        })
        .collect();
    format!("{prefix}/{zone}")
}

/// The message a cosignature at `time` over checkpoint body `body` signs.
fn message(time: u64, body: &[u8]) -> Vec<u8> {
    let mut m = format!("cosignature/v1\ntime {time}\n").into_bytes();
    m.extend_from_slice(body);
    m
}

fn key_id(name: &str, public: &VerifyingKey) -> u32 {
    signed_note::key_id(name, &[&[COSIGNATURE_V1][..], public.as_bytes()].concat())
}

/// This root's cosigner: its witness key, derived from the master key.
pub struct Cosigner {
    name: String,
    id: u32,
    key: SigningKey,
}

impl Cosigner {
    /// The cosigner `name` of the root holding `master`.
    pub fn derive(master: &MasterKey, name: &str) -> Cosigner {
        let key = SigningKey::from_bytes(&master.derive_key(KEY_PURPOSE));
        Cosigner {
            name: name.to_owned(),
            id: key_id(name, &key.verifying_key()),
            key,
        }
    }

    /// The default cosigner name of zone `zone`'s root: `root-mcp-witness/<zone>`.
    pub fn default_name(zone: &str) -> String {
        key_name("root-mcp-witness", zone)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The verifier key logs check this cosigner's cosignatures with.
    pub fn verifier_key(&self) -> String {
        let public = [&[COSIGNATURE_V1][..], self.key.verifying_key().as_bytes()].concat();
        format!("{}+{:08x}+{}", self.name, self.id, B64.encode(public))
    }
}

impl Signer for Cosigner {
    fn name(&self) -> &str {
        &self.name
    }

    fn key_id(&self) -> u32 {
        self.id
    }

    fn sign(&self, body: &[u8]) -> Result<Vec<u8>, ed25519_dalek::SignatureError> {
        let time = mcp_shared::time::unix_ms(mcp_shared::time::now()).max(0) as u64 / 1000;
        let sig = self.key.try_sign(&message(time, body))?;
        Ok([&time.to_be_bytes()[..], &sig.to_bytes()[..]].concat())
    }
}

/// Checks a witness's cosignatures.
#[derive(Debug, Clone)]
pub struct CosignatureVerifier {
    name: String,
    id: u32,
    key: VerifyingKey,
}

impl CosignatureVerifier {
    /// The verifier of verifier key `vkey` (type 0x04).
    pub fn new(vkey: &str) -> Result<CosignatureVerifier, KeyError> {
        let mut parts = vkey.splitn(3, '+');
        let (Some(name), Some(id), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(KeyError::Format);
        };
        let id = (id.len() == 8)
            .then(|| u32::from_str_radix(id, 16).ok())
            .flatten()
            .ok_or(KeyError::Format)?;
        let key = B64.decode(key).map_err(|_| KeyError::Format)?;
        if !signed_note::is_key_name_valid(name) {
            return Err(KeyError::Format);
        }
        let (&alg, public) = key.split_first().ok_or(KeyError::Format)?;
        if alg != COSIGNATURE_V1 {
            return Err(KeyError::Algorithm);
        }
        let public: [u8; 32] = public.try_into().map_err(|_| KeyError::Format)?;
        let key = VerifyingKey::from_bytes(&public).map_err(|_| KeyError::Format)?;
        if key_id(name, &key) != id {
            return Err(KeyError::Id);
        }
        Ok(CosignatureVerifier {
            name: name.to_owned(),
            id,
            key,
        })
    }
}

impl Verifier for CosignatureVerifier {
    fn name(&self) -> &str {
        &self.name
    }

    fn key_id(&self) -> u32 {
        self.id
    }

    fn verify(&self, body: &[u8], sig: &[u8]) -> bool {
        let Some(time) = timestamp(sig) else {
            return false;
        };
        let Ok(sig) = ed25519_dalek::Signature::from_slice(&sig[8..]) else {
            return false;
        };
        self.key.verify(&message(time, body), &sig).is_ok()
    }
}

/// The time (unix seconds) of cosignature bytes `sig` (after the key id), when they have the
/// cosignature/v1 shape.
pub fn timestamp(sig: &[u8]) -> Option<u64> {
    if sig.len() != 72 {
        return None;
    }
    let time = u64::from_be_bytes(sig[..8].try_into().ok()?);
    (time <= i64::MAX as u64).then_some(time)
}

#[cfg(test)]
mod tests {
    use super::*;
    use signed_note::{Note, VerifierList};

    fn master() -> MasterKey {
        let dir = tempfile::tempdir().unwrap();
        MasterKey::load_or_create(&dir.path().join("master.key"))
            .unwrap()
            .0
    }

    #[test]
    fn a_cosignature_verifies_with_the_witness_key_only_over_its_checkpoint() {
        let master = master();
        let w = Cosigner::derive(&master, "root-mcp-witness/zone-b");
        let vkey = w.verifier_key();
        let verifier = CosignatureVerifier::new(&vkey).unwrap();
        let body = b"root-mcp/zone-a\n3\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";
        let mut note = Note::new(body, &[]).unwrap();
        note.add_sigs(&[&w]).unwrap();
        let known = VerifierList::new(vec![Box::new(verifier.clone())]);
        let (ok, _) = Note::from_bytes(&note.to_bytes())
            .unwrap()
            .verify(&known)
            .unwrap();
        assert_eq!(ok.len(), 1);
        let t = timestamp(ok[0].signature()).unwrap();
        let now = mcp_shared::time::unix_ms(mcp_shared::time::now()) as u64 / 1000;
        assert!(t <= now && now - t < 5, "{t} {now}");
        // Another body, the same signature line: refused.
        let forged = String::from_utf8(note.to_bytes())
            .unwrap()
            .replace("\n3\n", "\n4\n");
        assert!(
            Note::from_bytes(forged.as_bytes())
                .unwrap()
                .verify(&known)
                .is_err()
        );
        // A log's Ed25519 key (type 0x01) is not a cosigner key.
        let log = crate::audit::checkpoint::LogKey::derive(&master, "zone-a");
        assert!(matches!(
            CosignatureVerifier::new(log.verifier_key()),
            Err(KeyError::Algorithm)
        ));
        let broken = vkey.replacen('+', "+0", 1);
        assert!(CosignatureVerifier::new(&broken).is_err());
    }
}
