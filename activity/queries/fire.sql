-- One move of the bot's (migration 30's engagement_fire): @trigger for
-- @user_id as of @at (NULL: now), once per @request_key (NULL: none).
-- Returns the user's state afterwards.
--
-- nullable: @at, @request_key
-- not null: state
SELECT engagement_fire(@user_id::uuid, @trigger::text, @at::timestamptz, @request_key::text) AS state
