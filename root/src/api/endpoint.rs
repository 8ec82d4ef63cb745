//! `Endpoint`: a route root serves (method, path) and its `Access`, who may call it; the
//! route tables, the console and OAuth list theirs with these.

/// Who may call a route, and whether a call is an operator action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone (health).
    Public,
    /// A lease or an operator; each sees what it may.
    Any,
    /// A lease's bearer (tool calls).
    Lease,
    /// An operator; reads nothing changes, so no audit event.
    OperatorRead,
    /// An operator; every call is one audit event naming the operator, refusals included.
    OperatorAction,
    /// A lease (its own) or an operator; every call is one audit event naming the caller.
    AnyAction,
    /// A hub's token, checked before the upgrade.
    Hub,
    /// Another replica of the zone (its own credential).
    Replica,
}

/// A route root serves: method, path (axum's syntax) and who may call it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    pub method: &'static str,
    pub path: &'static str,
    pub access: Access,
}
