-- The user's consent (migration 68's engagement_consent_record, what
-- engagement_opt_out and engagement_opt_in call): @opt_out says which,
-- from @source, said at @at (NULL: now), by @actor (an operator; NULL:
-- none), an opt-out queueing its confirmation when @confirm (migration
-- 54). Returns what it did: changed, unchanged or superseded (older than
-- the user's newest wish: logged, nothing else).
--
-- nullable: @at, @actor
-- not null: outcome
SELECT engagement_consent_record(@user_id::uuid, @opt_out::boolean, @source::text, @at::timestamptz, @actor::text,
                                 @confirm::boolean) AS outcome
