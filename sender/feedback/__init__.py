"""What comes back: the web service (one-click unsubscribe, relay events, metrics), the inbox reader, bounce and
reply parsing, mailbox health."""
