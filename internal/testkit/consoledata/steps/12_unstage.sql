-- The load is done: the staging schema goes.
DROP SCHEMA consoledata CASCADE
