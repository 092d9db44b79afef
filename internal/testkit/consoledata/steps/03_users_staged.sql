-- The staged users are built: the tables they were built from go, and the
-- planner learns the users' table for the steps that read it.
DROP TABLE cd_seed, cd_chain;
ANALYZE consoledata.users
