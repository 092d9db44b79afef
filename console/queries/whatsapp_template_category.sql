-- Meta's template_category_update webhook, a completed notification
-- (console/whatsapp_category.go): @template_name in @template_language is
-- now @category, Meta said at @at (entry.time; NULL, or a time in the
-- future: now). Older than what is recorded (Meta resends and reorders; a
-- Message Templates API read after it): nothing changes. Returns whether
-- the category changed.
--
-- nullable: @at, @template_id, @account_id
WITH recorded AS (
    INSERT INTO engagement_template_categories AS c
           (template_name, template_language, category, template_id, account_id, source, decided_at)
    VALUES (@template_name::text, @template_language::text, @category::text, @template_id::text, @account_id::text,
            'webhook', least(coalesce(@at::timestamptz, now()), now()))
        ON CONFLICT (template_name, template_language) DO UPDATE
       SET category = EXCLUDED.category,
           template_id = coalesce(EXCLUDED.template_id, c.template_id),
           account_id = coalesce(EXCLUDED.account_id, c.account_id),
           source = EXCLUDED.source,
           decided_at = EXCLUDED.decided_at
     WHERE date_trunc('second', c.decided_at) <= EXCLUDED.decided_at
    RETURNING 1
)
SELECT count(*) > 0 AS changed FROM recorded;
