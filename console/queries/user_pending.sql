-- How many of @user_id's messages are pending: what an opt-out cancels.
SELECT count(*) AS pending FROM engagement_message_queue WHERE user_id = @user_id::uuid AND status = 'pending'
