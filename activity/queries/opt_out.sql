-- The user's consent (migration 52's engagement_opt_out / engagement_opt_in):
-- @opt_out says which, from @source, as of @at (NULL: now), by @actor (an
-- operator; NULL: none), an opt-out queueing its confirmation when
-- @confirm (migration 54). Returns whether it changed anything.
--
-- nullable: @at, @actor
SELECT CASE WHEN @opt_out::boolean
            THEN engagement_opt_out(@user_id::uuid, @source::text, @at::timestamptz, @actor::text, @confirm::boolean)
            ELSE engagement_opt_in(@user_id::uuid, @source::text, @at::timestamptz, @actor::text) END AS changed
