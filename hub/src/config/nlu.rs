//! `[nlu]`: where the NLU content the `nlu_authoring.*` tools serve is read from.

use std::path::PathBuf;

use serde::Deserialize;

/// `[nlu]`: the NLU content the `nlu_authoring.*` tools serve (entities, intents, templates;
/// see [`crate::nlu`]). Each path is a JSON file; a relative path is taken under `state_dir`;
/// every path must lie under `state_dir` or a declared root.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NluConfig {
    /// The named-entity registry (`{"entities": [...]}`).
    pub entities: PathBuf,
    /// The intents (`{"intents": [...]}`).
    pub intents: PathBuf,
    /// Template files (`{"templates": [...]}`), or directories whose `*.json` files (directly
    /// inside, in name order) are template files; one path or a list.
    #[serde(deserialize_with = "one_or_many")]
    pub templates: Vec<PathBuf>,
}

/// A path or a list of paths.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
    #[derive(Deserialize, serde::Serialize, schemars::JsonSchema)]
    #[serde(untagged)]
    enum OneOrMany {
        One(PathBuf),
        Many(Vec<PathBuf>),
    }
    match OneOrMany::deserialize(d) {
        Ok(OneOrMany::One(p)) => Ok(vec![p]),
        Ok(OneOrMany::Many(v)) => Ok(v),
        Err(_) => Err(serde::de::Error::custom(
            "templates must be a path or a list of paths",
        )),
    }
}
