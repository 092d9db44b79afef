-- Whether database @datname exists.
SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = @datname) AS exists
