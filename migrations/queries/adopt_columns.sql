-- The columns of the tables named in @tables that exist in the current
-- schema, in table order: whether each table is a plain table, and each
-- column's type as PostgreSQL prints it, NOT NULL, and whether an insert
-- that leaves it out still gets a value (a default, an identity, a
-- generated column).
-- not null: is_table, type
SELECT c.relname::text AS table_name, c.relkind IN ('r', 'p') AS is_table,
       a.attname::text AS column_name, format_type(a.atttypid, a.atttypmod) AS type,
       a.attnotnull AS not_null, a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '' AS has_default
  FROM pg_class c
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
 WHERE c.relnamespace = current_schema()::regnamespace
   AND c.relname = ANY(@tables::text[])
 ORDER BY c.relname, a.attnum
