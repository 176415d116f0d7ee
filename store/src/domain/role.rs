//! A member's role in an account, and what each role may do (the issue's table; every check in the dashboard and
//! the store goes through [`Role::may`]).

use super::ValidationError;
use std::fmt;
use std::str::FromStr;

/// A role, from least to most trusted (the derived order is that).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Sees links, statistics, groups (not their keys) and domains.
    Viewer,
    /// And creates, edits, pauses and deletes links, sees group keys and uses the builder.
    Member,
    /// And manages groups, the API key, webhooks, and members who are not owners; sees the activity log.
    Admin,
    /// And manages owners and renames the account.
    Owner,
}

/// Something a role may or may not do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// See links, statistics, groups (not keys) and domains.
    View,
    /// Create, edit, pause and delete links; see group keys; use the dynamic-link builder.
    EditLinks,
    /// Create groups, change their settings, rotate their keys, delete them.
    ManageGroups,
    /// Generate, regenerate and revoke the API key.
    ManageApiKey,
    /// Add, change, test, rotate and delete webhook endpoints; read their delivery logs (account-level integration
    /// settings, like the API key).
    ManageWebhooks,
    /// Invite, re-role and remove viewers, members and admins; see the activity log.
    ManageMembers,
    /// Invite, re-role and remove owners; rename the account.
    ManageOwners,
}

impl Role {
    /// Every role, least trusted first (the order of the dashboard's select).
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Member, Role::Admin, Role::Owner];

    /// The role's name in the UI, the CLI, the database and the audit log.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Member => "member",
            Self::Admin => "admin",
            Self::Owner => "owner",
        }
    }

    /// Whether this role may do `p`.
    pub fn may(self, p: Permission) -> bool {
        let least = match p {
            Permission::View => Role::Viewer,
            Permission::EditLinks => Role::Member,
            Permission::ManageGroups
            | Permission::ManageApiKey
            | Permission::ManageWebhooks
            | Permission::ManageMembers => Role::Admin,
            Permission::ManageOwners => Role::Owner,
        };
        self >= least
    }

    /// Whether this role may invite someone as, re-role someone from or to, or remove someone holding `other`:
    /// admins manage everyone but owners, owners manage everyone.
    pub fn may_manage(self, other: Role) -> bool {
        if other == Role::Owner {
            self.may(Permission::ManageOwners)
        } else {
            self.may(Permission::ManageMembers)
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = ValidationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| {
                ValidationError::new(format!(
                    "role must be one of viewer, member, admin, owner; got {:?}",
                    s.chars().take(40).collect::<String>()
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_table() {
        use Permission::*;
        let table = [
            (View, [true, true, true, true]),
            (EditLinks, [false, true, true, true]),
            (ManageGroups, [false, false, true, true]),
            (ManageApiKey, [false, false, true, true]),
            (ManageWebhooks, [false, false, true, true]),
            (ManageMembers, [false, false, true, true]),
            (ManageOwners, [false, false, false, true]),
        ];
        for (p, allowed) in table {
            for (role, want) in Role::ALL.into_iter().zip(allowed) {
                assert_eq!(role.may(p), want, "{role} {p:?}");
            }
        }
    }

    #[test]
    fn managing_others() {
        assert!(Role::Admin.may_manage(Role::Admin));
        assert!(!Role::Admin.may_manage(Role::Owner));
        assert!(Role::Owner.may_manage(Role::Owner));
        assert!(!Role::Member.may_manage(Role::Viewer));
    }

    #[test]
    fn names_round_trip() {
        for r in Role::ALL {
            assert_eq!(r.as_str().parse::<Role>().unwrap(), r);
        }
        assert!("Owner".parse::<Role>().is_err());
        assert!("".parse::<Role>().is_err());
    }
}
