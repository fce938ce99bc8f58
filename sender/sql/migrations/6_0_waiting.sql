-- Version 6, first part: the status of a row that may not be due yet (its lead's earlier step is not sent, or its
-- campaign is not running). A value added to an enum cannot be used in the transaction that adds it, so this
-- file is a transaction of its own (sender.ledger.migrate commits after each file); IF NOT EXISTS makes it safe
-- to run again when 6_1 failed after it.
ALTER TYPE sender_status ADD VALUE IF NOT EXISTS 'waiting' BEFORE 'queued';
