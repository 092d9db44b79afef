-- Whether @table has a valid unique index on @column alone, serving
-- ON CONFLICT (@column) WHERE @column IS NOT NULL: without a predicate, or
-- with exactly that one.
-- not null: has_unique
SELECT EXISTS (
    SELECT
      FROM pg_index i
      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
     WHERE i.indrelid = to_regclass(quote_ident(@table::text))
       AND i.indisunique AND i.indisvalid AND i.indnatts = 1 AND i.indexprs IS NULL
       AND a.attname = @column::text
       AND (i.indpred IS NULL
            OR pg_get_expr(i.indpred, i.indrelid) = '(' || quote_ident(@column::text) || ' IS NOT NULL)')) AS has_unique
