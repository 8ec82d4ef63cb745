//! `Endpoint`: a route root serves (method, path) and its `Access`, who may call it; the
//! route tables, the console and OAuth list theirs with these.

use crate::roles::Role;

/// Who may call a route, and whether a call is an operator action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone (health).
    Public,
    /// A lease or an operator (any role); each sees what it may.
    Any,
    /// A lease's bearer (tool calls).
    Lease,
    /// An operator holding the role; reads nothing changes, so no audit event.
    OperatorRead(Role),
    /// An operator holding the role; every call is one audit event naming the operator,
    /// refusals included.
    OperatorAction(Role),
    /// A lease (its own) or an operator holding `operator`; every call is one audit event
    /// naming the caller.
    AnyAction,
    /// A hub's token, checked before the upgrade.
    Hub,
    /// Another replica of the zone (its own credential).
    Replica,
}

impl Access {
    /// The role an operator needs on the route; `None` where operators are not callers.
    pub fn role(self) -> Option<Role> {
        match self {
            Access::Any => Some(Role::Viewer),
            Access::OperatorRead(r) | Access::OperatorAction(r) => Some(r),
            Access::AnyAction => Some(Role::Operator),
            Access::Public | Access::Lease | Access::Hub | Access::Replica => None,
        }
    }

    /// Whether every call (refusals included) is an audit event naming its caller.
    pub fn audited(self) -> bool {
        matches!(self, Access::OperatorAction(_) | Access::AnyAction)
    }
}

/// A route root serves: method, path (axum's syntax) and who may call it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    pub method: &'static str,
    pub path: &'static str,
    pub access: Access,
}
