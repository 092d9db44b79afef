-- Users who opted out of re-engagement (the jobs never message them).
SELECT count(*) AS opted_out FROM user_profiles WHERE reengagement_opt_out;
