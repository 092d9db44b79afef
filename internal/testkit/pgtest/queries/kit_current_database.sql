-- The database a connection is on (the kit's own tests).
SELECT current_database()::text AS name
