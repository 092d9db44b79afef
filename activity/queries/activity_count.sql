-- How many transactions user @user_id created in (@since, @as_of].
SELECT count(*)::int AS transactions FROM transactions
 WHERE user_id = @user_id AND created_at > @since AND created_at <= @as_of
