-- Whether the index @index, in the current schema, is 'valid', 'invalid' (a
-- CONCURRENTLY build that failed or was interrupted) or 'missing'.
SELECT coalesce((SELECT CASE WHEN i.indisvalid THEN 'valid' ELSE 'invalid' END
                   FROM pg_index i
                   JOIN pg_class c ON c.oid = i.indexrelid
                  WHERE c.relname = @index::text
                    AND c.relnamespace = current_schema()::regnamespace), 'missing') AS state
