"""Placement tests on seed mailboxes (issue 42): messages sent through the agent to seeds of our own, found by IMAP,
placed by folder, judged by the receiver's own Authentication-Results."""
