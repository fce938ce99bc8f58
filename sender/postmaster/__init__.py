"""The provider's spam rate: each sending domain's daily user-reported spam ratio and reputation, read from Google
Postmaster Tools (`api`, with the access tokens of `credentials`), kept per domain and day in the ledger and told to
the warm-up gates (`sync`)."""
