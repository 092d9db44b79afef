-- The staging schema the first steps build the users in (consoledata.users
-- and its helpers), dropped once the load is done (12_unstage).
CREATE SCHEMA consoledata
