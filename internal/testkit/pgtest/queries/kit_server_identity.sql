-- The server's data directory and system identifier (bigint: the
-- identifier's bits).
SELECT current_setting('data_directory') AS data_directory, system_identifier
  FROM pg_control_system()
