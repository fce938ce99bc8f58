-- Version 9: unsubscribe tokens name the row's random idempotency key, no longer its id (ids come round again
-- after a restore from an older dump, so an old link could name someone else's row). No catalogue change, and
-- independent of version 8: only the moment of the upgrade is written, after which the agent puts no id-form token
-- in mail (it refuses a ledger below version 9). The web service still reads an id-form token, for 30 days, for a
-- row whose message went out before that moment (feedback.sql, row_of_row_id_token); a ledger made at version 9 or
-- later never had such tokens and has no such setting. The moment is kept as unix seconds: text that any DateStyle
-- reads back the same.

INSERT INTO sender_settings (name, value)
VALUES ('row_id_tokens_before', extract(epoch FROM now())::text)
ON CONFLICT (name) DO NOTHING;
