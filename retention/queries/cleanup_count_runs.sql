-- Dry run of cleanup_delete_runs.sql: how many job runs it would delete
-- (started before @cutoff, finished, named by no queue or log row now, not
-- among the latest @keep of their job and shard).
SELECT count(*) AS job_runs FROM engagement_job_runs r
 WHERE r.started_at < @cutoff
   AND r.status NOT IN ('running', 'delivering')
   AND NOT EXISTS (SELECT FROM engagement_message_queue q WHERE q.job_run_id = r.id)
   AND NOT EXISTS (SELECT FROM engagement_state_transitions t WHERE t.job_run_id = r.id)
   AND (r.started_at, r.id) < (SELECT n.started_at, n.id FROM engagement_job_runs n
                                WHERE n.job = r.job AND coalesce(n.shard, '') = coalesce(r.shard, '')
                                ORDER BY n.started_at DESC, n.id DESC
                               OFFSET @keep::int - 1 LIMIT 1)
