//! Fuzzes the root↔hub frame decoder (`mcp_shared::protocol::decode`) in both directions:
//! any input decodes or names its error, a decoded frame encodes and decodes to itself, and
//! root's fast path for result frames (`decode_from_hub`) answers what `decode` answers.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_shared::protocol::{self, HubToRoot, RootToHub};

fn roundtrip<B>(text: &str)
where
    B: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    match protocol::decode::<B>(text) {
        Ok(env) => {
            let again = serde_json::to_string(&env).expect("a decoded frame encodes");
            assert_eq!(
                protocol::decode::<B>(&again).expect("and decodes again"),
                env
            );
        }
        Err(e) => assert!(
            matches!(
                e,
                protocol::DecodeError::Malformed(_)
                    | protocol::DecodeError::Version { .. }
                    | protocol::DecodeError::TooLarge { .. }
            ),
            "{e}"
        ),
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    assert_eq!(
        protocol::decode_from_hub(&text),
        protocol::decode::<HubToRoot>(&text)
    );
    roundtrip::<HubToRoot>(&text);
    roundtrip::<RootToHub>(&text);
});
