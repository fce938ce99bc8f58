"""The send path: the agent's loop, SMTP submission, outcome decisions, the message, unsubscribe tokens and the
warm-up counters rebuilt from the ledger."""
