-- When the weekly run of each as-of of @as_ofs started (pg_temp.cd_wstarted).
SELECT array_agg(pg_temp.cd_wstarted(w) ORDER BY n) AS started
  FROM unnest(@as_ofs::timestamptz[]) WITH ORDINALITY AS x (w, n)
