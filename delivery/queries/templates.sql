-- Each template's status as Meta's webhook last said it
-- (engagement_template_status), the held ones (PAUSED, DISABLED) first,
-- then by name; at most @max_templates.
-- not null: held
SELECT t.template_name, t.status, t.status IN ('PAUSED', 'DISABLED') AS held, t.updated_at
  FROM engagement_template_status t
 ORDER BY held DESC, t.template_name
 LIMIT @max_templates;
