//! What the skill's adapters declare, as data: [`AdapterDecl`] (tool, name, whether it
//! writes), the built-in adapters ([`Builtin`], [`ADAPTERS`]) from the table in
//! [`super::table`], and [`Provided`], what a configuration gives them to serve. Nothing here
//! runs an adapter (that is [`super::registry`]), so the configuration, the context and the
//! gate read declarations without depending on the adapters' code.

/// What an adapter declares about itself: the tool it serves, its name, whether it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdapterDecl {
    pub tool_id: &'static str,
    pub name: &'static str,
    pub writes: bool,
}

/// What a configuration gives the built-in adapters to serve (health checks, allowed tests,
/// managed services, a deploy repository, NLU content), read alike from a `HubConfig` and a
/// `HubFile` (their `provided()`): [`served`] publishes from it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Provided {
    /// A `[[skill.healthchecks]]` entry, or a managed service with a health check.
    pub healthchecks: bool,
    /// A `[[skill.allowed_tests]]` entry.
    pub allowed_tests: bool,
    /// A managed service (`[[services]]`).
    pub services: bool,
    /// A `[deploy]` repository.
    pub deploy: bool,
    /// An `[nlu]` section.
    pub nlu: bool,
}

/// Declares the built-in adapters from the table: a variant of [`Builtin`] per entry, an
/// entry of [`BUILTINS`] (in table order), its [`AdapterDecl`] and its arm of
/// [`Builtin::serves`]. The work (`run`) is left to [`super::registry`].
macro_rules! declare_builtins {
    ($(
        $kind:ident {
            tool_id: $tool_id:literal,
            name: $name:literal,
            writes: $writes:literal,
            serves: |$cfg:pat_param| $serves:expr,
            run: |$ctx:ident, $input:ident| $run:expr $(,)?
        }
    )*) => {
        /// A built-in adapter of `infra_access_skill`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Builtin {
            $($kind,)*
        }

        /// Every built-in adapter, in the order of [`ADAPTERS`].
        pub(crate) const BUILTINS: [Builtin; [$(stringify!($kind)),*].len()] = [$(Builtin::$kind),*];

        impl Builtin {
            pub const fn decl(self) -> AdapterDecl {
                match self {
                    $(Builtin::$kind => AdapterDecl {
                        tool_id: $tool_id,
                        name: $name,
                        writes: $writes,
                    },)*
                }
            }

            /// Whether this hub's configuration gives the adapter something to serve (a hub
            /// publishes only those): health checks, allowed tests, a deploy repository,
            /// managed services, NLU content.
            pub fn serves(self, config: Provided) -> bool {
                match self {
                    $(Builtin::$kind => {
                        let $cfg = config;
                        $serves
                    })*
                }
            }
        }
    };
}

super::table::builtin_adapters!(declare_builtins);

/// Every built-in adapter of `infra_access_skill`, with the tool it serves.
pub const ADAPTERS: [AdapterDecl; BUILTINS.len()] = {
    let mut decls = [Builtin::Status.decl(); BUILTINS.len()];
    let mut i = 0;
    while i < BUILTINS.len() {
        decls[i] = BUILTINS[i].decl();
        i += 1;
    }
    decls
};

impl Builtin {
    /// The built-in adapter serving `tool_id`.
    pub fn for_tool(tool_id: &str) -> Option<Builtin> {
        BUILTINS.into_iter().find(|k| k.decl().tool_id == tool_id)
    }
}

/// The built-in adapters `config` gives something to serve, in table order: a hub without
/// managed services publishes no `hub.memory.*` and no `hub.restart_service`, one without
/// `[nlu]` no `nlu_authoring.*`, and so on. The rest answer from the hub itself.
pub(crate) fn served(config: Provided) -> impl Iterator<Item = Builtin> {
    BUILTINS.into_iter().filter(move |k| k.serves(config))
}
