-- Migration 0016 gives SQLite a trigram index for the list's `q`; PostgreSQL has had one since 0011 (pg_trgm GIN).
-- Kept so that both engines count the same migrations.
SELECT 1;
