-- In a transaction of its own, makes its commit flush the WAL
-- (synchronous_commit on, for the transaction) and gives it a transaction
-- id, so that its commit is a WAL record that waits for the flush of
-- everything before it.
SELECT set_config('synchronous_commit', 'on', true) AS synchronous_commit, txid_current() AS xid
