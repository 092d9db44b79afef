-- @transport's number health as last recorded (the Graph API or Meta's
-- webhook), and the templates Meta has paused or disabled now.
SELECT h.quality_rating, h.messaging_limit_tier, coalesce(h.flagged, false) AS flagged, h.read_at,
       coalesce((SELECT array_agg(t.template_name ORDER BY t.template_name)
                   FROM engagement_template_status t
                  WHERE t.status IN ('PAUSED', 'DISABLED')), '{}') AS paused_templates
  FROM (SELECT 1) one
  LEFT JOIN engagement_number_health h ON h.transport = @transport;
