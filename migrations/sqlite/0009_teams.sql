-- Teams (issue 23): a user is a person (email, password, sessions); an account stays what the specification calls
-- an account (it owns the API key, the groups, the domains and the links); a membership joins a user to an account
-- with a role. Every change to an account's data writes one audit_log row in the change's transaction.
--
-- Nobody notices the migration: every account that had a password becomes a user with the same id, email and
-- password who is its owner; their sessions and pending invitations carry over.

CREATE TABLE users (
    id            TEXT   PRIMARY KEY,
    email         TEXT   NOT NULL UNIQUE,
    -- argon2id in the PHC string format.
    password_hash TEXT   NOT NULL,
    -- Disabled by the operator: cannot sign in, every session ended.
    disabled      BIGINT NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    created_at    BIGINT NOT NULL
);

CREATE TABLE memberships (
    account_id TEXT   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    user_id    TEXT   NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role       TEXT   NOT NULL CHECK (role IN ('viewer', 'member', 'admin', 'owner')),
    created_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, user_id)
);
CREATE INDEX memberships_user ON memberships (user_id);

INSERT INTO users (id, email, password_hash, disabled, created_at)
    SELECT id, email, password_hash, 0, created_at FROM accounts WHERE password_hash IS NOT NULL;
INSERT INTO memberships (account_id, user_id, role, created_at)
    SELECT id, id, 'owner', created_at FROM accounts WHERE password_hash IS NOT NULL;

-- The account's name, shown on every page and in the account switcher; the owner may rename it.
ALTER TABLE accounts ADD COLUMN name TEXT NOT NULL DEFAULT '';
UPDATE accounts SET name = email;
ALTER TABLE accounts DROP COLUMN password_hash;

-- An invitation to join an account with a role (the operator's invitation is an owner's). One live invitation
-- per account and email: a new one replaces the earlier.
CREATE TABLE invitations (
    token_hash TEXT   PRIMARY KEY,
    account_id TEXT   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    email      TEXT   NOT NULL,
    role       TEXT   NOT NULL CHECK (role IN ('viewer', 'member', 'admin', 'owner')),
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX invitations_account_email ON invitations (account_id, email);
INSERT INTO invitations (token_hash, account_id, email, role, created_at, expires_at)
    SELECT i.token_hash, i.account_id, a.email, 'owner', i.created_at, i.expires_at
    FROM invites i JOIN accounts a ON a.id = i.account_id;
DROP TABLE invites;

-- A session is a user's; account_id is the account they are looking at (NULL when they have none left). Each
-- request checks the membership, so a removed member's sessions lose the account at once.
CREATE TABLE user_sessions (
    id_hash      TEXT   PRIMARY KEY,
    user_id      TEXT   NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    account_id   TEXT   REFERENCES accounts (id) ON DELETE SET NULL,
    created_at   BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL
);
INSERT INTO user_sessions (id_hash, user_id, account_id, created_at, last_seen_at)
    SELECT s.id_hash, s.account_id, s.account_id, s.created_at, s.last_seen_at
    FROM sessions s JOIN users u ON u.id = s.account_id;
DROP TABLE sessions;
ALTER TABLE user_sessions RENAME TO sessions;
CREATE INDEX sessions_user ON sessions (user_id);

-- A one-use link to set a new password, valid one hour.
CREATE TABLE password_resets (
    token_hash TEXT   PRIMARY KEY,
    user_id    TEXT   NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX password_resets_user ON password_resets (user_id);

-- The activity log. actor_type is 'user' (actor_email set), 'api_key' or 'operator'; details is a JSON object of
-- what changed, never a secret. Kept 365 days by default (the hourly maintenance prunes it).
CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id  TEXT   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    at          BIGINT NOT NULL,
    actor_type  TEXT   NOT NULL CHECK (actor_type IN ('user', 'api_key', 'operator')),
    actor_email TEXT,
    action      TEXT   NOT NULL,
    target_type TEXT   NOT NULL,
    target_id   TEXT   NOT NULL,
    details     TEXT   NOT NULL
);
CREATE INDEX audit_log_account_at ON audit_log (account_id, at DESC, id DESC);
CREATE INDEX audit_log_at ON audit_log (at);
