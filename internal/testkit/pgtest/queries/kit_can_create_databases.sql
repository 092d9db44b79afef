-- Whether the test kit's role may create the tests' databases.
SELECT rolsuper OR rolcreatedb AS can_create
  FROM pg_roles
 WHERE rolname = current_user
