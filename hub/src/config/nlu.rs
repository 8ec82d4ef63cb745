//! `[nlu]`: where the NLU content the `nlu_authoring.*` tools serve is read from.

use std::path::PathBuf;

use serde::Deserialize;

use super::{ConfigError, HubConfig};

/// `[nlu]`: the NLU content the `nlu_authoring.*` tools serve (entities, intents, templates;
/// see [`crate::nlu`]). Each path is a JSON file; a relative path is taken under `state_dir`;
/// every path must lie under `state_dir` or a declared root.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
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
    #[derive(Deserialize)]
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

impl HubConfig {
    /// The `[nlu]` paths as the hub reads them (relative ones under `state_dir`).
    pub fn nlu_paths(&self) -> Option<NluConfig> {
        self.nlu.as_ref().map(|n| NluConfig {
            entities: self.under_state_dir(&n.entities),
            intents: self.under_state_dir(&n.intents),
            templates: n
                .templates
                .iter()
                .map(|p| self.under_state_dir(p))
                .collect(),
        })
    }

    /// Checks `[nlu]`: template paths given, every path confined.
    pub(super) fn validate_nlu(&self) -> Result<(), ConfigError> {
        let Some(nlu) = self.nlu_paths() else {
            return Ok(());
        };
        if nlu.templates.is_empty() {
            return Err(ConfigError::Invalid(
                "nlu: templates names no file or directory".into(),
            ));
        }
        self.check_confined("nlu: entities", &nlu.entities)?;
        self.check_confined("nlu: intents", &nlu.intents)?;
        for path in &nlu.templates {
            self.check_confined("nlu: templates", path)?;
        }
        Ok(())
    }
}
