-- engagementctl smoke's tally of the queue: the messages by status.
SELECT status, count(*) AS messages FROM engagement_message_queue GROUP BY status
