-- Generate's settings for its own transaction: no JIT, work_mem 256MB and
-- no statement_timeout (a role's or database's default; 10M users take
-- minutes), returning the values they replace (settings_restore.sql puts
-- them back before the commit, for a caller whose transaction goes on).
SELECT current_setting('jit') AS jit,
       current_setting('work_mem') AS work_mem,
       current_setting('statement_timeout') AS statement_timeout,
       set_config('jit', 'off', true) AS jit_set,
       set_config('work_mem', '256MB', true) AS work_mem_set,
       set_config('statement_timeout', '0', true) AS statement_timeout_set
