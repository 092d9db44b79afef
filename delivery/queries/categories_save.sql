-- Record the templates' categories as Meta's Message Templates API listed
-- them (queue-process, at the start of a run on the Cloud API with
-- --whatsapp-business-account-id): one row per template name and
-- language (@names, @languages, @categories, @template_ids: '' for none),
-- said now. A row Meta said something newer about (a webhook triggered
-- after this read) is left as it is.
INSERT INTO engagement_template_categories AS c
       (template_name, template_language, category, template_id, account_id, source, decided_at)
SELECT t.name, t.language, t.category, nullif(t.template_id, ''), nullif(@account_id::text, ''), 'templates_api', now()
  FROM unnest(@names::text[], @languages::text[], @categories::text[], @template_ids::text[])
       AS t(name, language, category, template_id)
    ON CONFLICT (template_name, template_language) DO UPDATE
   SET category = EXCLUDED.category,
       template_id = coalesce(EXCLUDED.template_id, c.template_id),
       account_id = coalesce(EXCLUDED.account_id, c.account_id),
       source = EXCLUDED.source,
       decided_at = EXCLUDED.decided_at
 WHERE c.decided_at <= EXCLUDED.decided_at;
