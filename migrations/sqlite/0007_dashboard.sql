-- The dashboard: passwords, one-use invitations, sessions, and the throttle on failed sign-ins. Every secret
-- (invitation token, session id) is random, handed out once, and kept here only as its SHA-256 hash (hex).

-- argon2id in the PHC string format; NULL until the account's holder accepts an invitation.
ALTER TABLE accounts ADD COLUMN password_hash TEXT;

CREATE TABLE invites (
    token_hash TEXT   PRIMARY KEY,
    account_id TEXT   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX invites_account ON invites (account_id);

CREATE TABLE sessions (
    id_hash      TEXT   PRIMARY KEY,
    account_id   TEXT   NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    created_at   BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL
);
CREATE INDEX sessions_account ON sessions (account_id);

-- One row per failed sign-in and subject: 'email:<address as typed, normalised>' and 'ip:<address>'. Rows older
-- than the throttle's window are deleted as new ones arrive.
CREATE TABLE sign_in_failures (
    subject TEXT   NOT NULL,
    at      BIGINT NOT NULL
);
CREATE INDEX sign_in_failures_subject_at ON sign_in_failures (subject, at);
