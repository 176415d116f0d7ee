-- The management writes' budget (store/src/write_budget.rs): one row per counted write, per subject (an API key's
-- id, or 'dashboard:<account id>'), kept for one window (a minute). Each charge deletes its subject's older rows.
CREATE TABLE write_budget (
    subject TEXT   NOT NULL,
    at      BIGINT NOT NULL
);
CREATE INDEX write_budget_subject_at ON write_budget (subject, at);
-- For the maintenance that prunes every subject's old rows at once.
CREATE INDEX write_budget_at ON write_budget (at);
