-- The list's `q` on SQLite (issue 24): an FTS5 index with the trigram tokenizer over links.search_text (the
-- lowercase short code, destination and title), kept by triggers, so a search of 3 characters or more reads the
-- index instead of scanning the account's links. External content: the text is stored once, in links.
CREATE VIRTUAL TABLE links_search USING fts5(search_text, content = 'links', content_rowid = 'rowid', tokenize = 'trigram');
INSERT INTO links_search (links_search) VALUES ('rebuild');
CREATE TRIGGER links_search_insert AFTER INSERT ON links BEGIN
    INSERT INTO links_search (rowid, search_text) VALUES (new.rowid, new.search_text);
END;
CREATE TRIGGER links_search_delete AFTER DELETE ON links BEGIN
    INSERT INTO links_search (links_search, rowid, search_text) VALUES ('delete', old.rowid, old.search_text);
END;
CREATE TRIGGER links_search_update AFTER UPDATE OF search_text ON links BEGIN
    INSERT INTO links_search (links_search, rowid, search_text) VALUES ('delete', old.rowid, old.search_text);
    INSERT INTO links_search (rowid, search_text) VALUES (new.rowid, new.search_text);
END;
