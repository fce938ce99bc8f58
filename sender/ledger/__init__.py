"""The send ledger: the PostgreSQL connection, migrations, the SQL files' named queries, the rows' store and the
feedback side (events under the rank guard), and the CSV rows an application enqueues."""
