-- Record @transport's number health as the Graph API just read it (a field
-- it did not carry, NULL, keeps the value known before), from @source, at
-- the processor's clock; returns what is known now.
--
-- nullable: @quality_rating, @messaging_limit_tier, @flagged
INSERT INTO engagement_number_health AS h (transport, quality_rating, messaging_limit_tier, flagged, read_at, source)
VALUES (@transport, @quality_rating, @messaging_limit_tier, coalesce(@flagged::boolean, false),
        now() + @clock_offset::interval, @source)
    ON CONFLICT (transport) DO UPDATE
   SET quality_rating       = coalesce(EXCLUDED.quality_rating, h.quality_rating),
       messaging_limit_tier = coalesce(EXCLUDED.messaging_limit_tier, h.messaging_limit_tier),
       flagged              = coalesce(@flagged::boolean, h.flagged),
       read_at              = EXCLUDED.read_at,
       source               = EXCLUDED.source
RETURNING h.quality_rating, h.messaging_limit_tier, h.flagged, h.read_at;
