-- Meta's verdict on each transport's number as recorded (the Graph API's
-- reads, the console's webhook), by transport name. A template status
-- with no number health yet (the webhook came before any run) still shows
-- a row for the Cloud API's transport, @cloud_transport, whose templates
-- they are (templates.sql).
SELECT n.transport, h.quality_rating, h.messaging_limit_tier, coalesce(h.flagged, false) AS flagged, h.read_at, h.source
  FROM (SELECT h.transport FROM engagement_number_health h
         UNION
        SELECT @cloud_transport::text WHERE EXISTS (SELECT FROM engagement_template_status)) n
  LEFT JOIN engagement_number_health h ON h.transport = n.transport
 ORDER BY n.transport;
