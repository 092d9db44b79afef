-- The user's hour (issue 61): engagement-daily --best-hour-percent splits the
-- goodbyes into two arms by user id, as the holdout does, and the funnel
-- compares them. The arm a goodbye's user was assigned is kept on its
-- transition, beside holdout and variant: 'best_hour' (sent at the hour the
-- user usually writes, when that hour is known) or 'run_time' (sent at the
-- run's time). NULL when the run used neither --best-hour nor
-- --best-hour-percent.
ALTER TABLE engagement_state_transitions
    ADD COLUMN timing text CHECK (timing IN ('best_hour', 'run_time'));
