-- Puts back the settings settings_lift.sql replaced, for the rest of the
-- transaction.
SELECT set_config('jit', @jit::text, true) AS jit,
       set_config('work_mem', @work_mem::text, true) AS work_mem,
       set_config('statement_timeout', @statement_timeout::text, true) AS statement_timeout
